package pcie

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidAddress is returned (wrapped) when a string is not a PCI address.
var ErrInvalidAddress = errors.New("pcie: invalid address")

// Address is a PCI function address: domain (segment), bus, device and function.
//
// Domains are 16-bit on most machines but Intel VMD exposes 32-bit ones
// (for example 10000:e1:00.0), so the domain is a uint32.
type Address struct {
	Domain   uint32
	Bus      uint8
	Device   uint8 // 0..31
	Function uint8 // 0..7
}

// ParseAddress parses the canonical form DDDD:BB:DD.F (domain of 4 or more hex digits) and
// the short form BB:DD.F, which means domain 0, as lspci prints it.
func ParseAddress(s string) (Address, error) {
	bad := func(why string) (Address, error) {
		return Address{}, fmt.Errorf("%w %q: %s", ErrInvalidAddress, s, why)
	}
	var a Address
	rest := s
	if strings.Count(s, ":") == 2 {
		i := strings.IndexByte(s, ':')
		dom := s[:i]
		if len(dom) == 0 || len(dom) > 8 {
			return bad("domain must have 1 to 8 hex digits")
		}
		d, err := strconv.ParseUint(dom, 16, 32)
		if err != nil {
			return bad("domain is not hexadecimal")
		}
		a.Domain = uint32(d)
		rest = s[i+1:]
	}
	busStr, devfn, ok := strings.Cut(rest, ":")
	if !ok {
		return bad("want [DDDD:]BB:DD.F")
	}
	devStr, fnStr, ok := strings.Cut(devfn, ".")
	if !ok {
		return bad("want [DDDD:]BB:DD.F")
	}
	if len(busStr) == 0 || len(busStr) > 2 || len(devStr) == 0 || len(devStr) > 2 || len(fnStr) != 1 {
		return bad("want [DDDD:]BB:DD.F")
	}
	bus, err := strconv.ParseUint(busStr, 16, 8)
	if err != nil {
		return bad("bus is not hexadecimal")
	}
	dev, err := strconv.ParseUint(devStr, 16, 8)
	if err != nil || dev > 31 {
		return bad("device must be 00-1f")
	}
	fn, err := strconv.ParseUint(fnStr, 16, 8)
	if err != nil || fn > 7 {
		return bad("function must be 0-7")
	}
	a.Bus, a.Device, a.Function = uint8(bus), uint8(dev), uint8(fn)
	return a, nil
}

// String returns the canonical form, %04x:%02x:%02x.%x, as sysfs names the function.
func (a Address) String() string {
	var buf [16]byte
	return string(a.AppendText(buf[:0]))
}

// AppendText appends the canonical form to b (encoding.TextAppender). It is
// String without the allocation, for writers of many addresses.
func (a Address) AppendText(b []byte) []byte {
	const hex = "0123456789abcdef"
	// The domain takes at least four digits, more for VMD's 32-bit domains.
	digits := 4
	for d := a.Domain >> 16; d != 0; d >>= 4 {
		digits++
	}
	for i := digits - 1; i >= 0; i-- {
		b = append(b, hex[a.Domain>>(4*uint(i))&0xf])
	}
	return append(b, ':', hex[a.Bus>>4], hex[a.Bus&0xf], ':', hex[a.Device>>4], hex[a.Device&0xf], '.', hex[a.Function&0xf])
}

// DevFn returns the kernel's devfn byte: device<<3 | function.
func (a Address) DevFn() uint8 { return a.Device<<3 | a.Function }

// Compare orders addresses by domain, bus, device, function, like lspci.
func (a Address) Compare(b Address) int {
	switch {
	case a.Domain != b.Domain:
		return cmpInt(a.Domain, b.Domain)
	case a.Bus != b.Bus:
		return cmpInt(a.Bus, b.Bus)
	default:
		return cmpInt(a.DevFn(), b.DevFn())
	}
}

func cmpInt[T uint8 | uint32](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// MarshalText implements encoding.TextMarshaler with the canonical form.
func (a Address) MarshalText() ([]byte, error) { return a.AppendText(nil), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Address) UnmarshalText(b []byte) error {
	v, err := ParseAddress(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}
