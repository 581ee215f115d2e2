package wccopy

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// guardByte fills the bytes around every destination; test data never
// contains it, so any stray store shows.
const guardByte byte = 0xA5

// guardLen is the number of guard bytes on each side of the destination.
const guardLen = 64

// kernel is one direction of one variant.
type kernel struct {
	name string
	fn   func(dst, src []byte) int
	// deviceIsDst says which side's alignment drives the ladder.
	deviceIsDst bool
}

// kernels returns every available kernel in both directions. A variant the
// CPU lacks is logged, not failed, so the tests pass on any amd64 host.
func kernels(t testing.TB) []kernel {
	var ks []kernel
	for _, v := range Variants() {
		if !v.Available {
			t.Logf("variant %s not available on this CPU", v.Name)
			continue
		}
		if v.ToDevice != nil {
			ks = append(ks, kernel{"ToDevice/" + v.Name, v.ToDevice, true})
		}
		if v.FromDevice != nil {
			ks = append(ks, kernel{"FromDevice/" + v.Name, v.FromDevice, false})
		}
	}
	return ks
}

// aligned returns n bytes starting at a 64-byte boundary.
func aligned(n int) []byte {
	b := make([]byte, n+63)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b)))) & 63
	return b[off : off+n : off+n]
}

// randomData returns n random bytes, none equal to guardByte.
func randomData(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
		if b[i] == guardByte {
			b[i] = ^guardByte
		}
	}
	return b
}

// bench is a reusable pair of 64-byte aligned buffers in which copies of up
// to max bytes run at any offset 0-63 on either side, with guardLen guard
// bytes around the destination.
type bench struct {
	dbuf, sbuf, fill []byte
}

func newBench(r *rand.Rand, max int) *bench {
	n := 2*guardLen + 64 + max
	b := &bench{dbuf: aligned(n), sbuf: aligned(64 + max), fill: bytes.Repeat([]byte{guardByte}, n)}
	copy(b.sbuf, randomData(r, len(b.sbuf)))
	return b
}

// check copies n bytes with fn from source offset so to destination offset
// do (both 0-63 from a 64-byte boundary) and compares with copy.
func (b *bench) check(fn func(dst, src []byte) int, n, do, so int) error {
	start := guardLen + do
	end := start + n + guardLen
	copy(b.dbuf[:end], b.fill)
	dst := b.dbuf[start : start+n : start+n]
	src := b.sbuf[so : so+n : so+n]
	if got := fn(dst, src); got != n {
		return fmt.Errorf("n=%d dstOff=%d srcOff=%d: returned %d", n, do, so, got)
	}
	if !bytes.Equal(dst, src) {
		i := 0
		for dst[i] == src[i] {
			i++
		}
		return fmt.Errorf("n=%d dstOff=%d srcOff=%d: first difference at byte %d: got %#x, want %#x", n, do, so, i, dst[i], src[i])
	}
	if !bytes.Equal(b.dbuf[:start], b.fill[:start]) || !bytes.Equal(b.dbuf[start+n:end], b.fill[start+n:end]) {
		return fmt.Errorf("n=%d dstOff=%d srcOff=%d: guard bytes overwritten", n, do, so)
	}
	return nil
}

// offsets returns every offset 0-63.
func offsets() []int {
	o := make([]int, 64)
	for i := range o {
		o[i] = i
	}
	return o
}

// hostOffsets samples the 64 offsets of the side whose alignment does not
// drive the ladder: the interesting ones, plus one that moves with the
// device offset and the size so that the cross product is covered over the
// sweep.
func hostOffsets(n, dev int) []int {
	return []int{0, 1, 8, 15, 16, 31, 32, 33, 63, (dev*7 + n) % 64}
}

// sweepSizes lists the sizes TestKernels checks beyond 0-256: a dense sample
// to 4096 with every multiple of 16 and its neighbours, and 64 KiB and
// 1 MiB, each ±1.
func sweepSizes() []int {
	var s []int
	for n := 257; n <= 4096; n++ {
		if m := n % 16; m <= 1 || m == 15 || n%7 == 0 {
			s = append(s, n)
		}
	}
	return append(s, 64<<10-1, 64<<10, 64<<10+1, 1<<20-1, 1<<20, 1<<20+1)
}

// TestWidth checks the access-width rule of the generic kernels.
func TestWidth(t *testing.T) {
	tests := []struct {
		addr uintptr
		rem  int
		want int
	}{
		{0x1000, 100, 8},
		{0x1000, 8, 8},
		{0x1000, 7, 4},
		{0x1000, 3, 2},
		{0x1000, 1, 1},
		{0x1004, 100, 4},
		{0x1002, 100, 2},
		{0x1006, 3, 2},
		{0x1001, 100, 1},
		{0x1003, 2, 1},
		{0x100c, 4, 4},
		{0x1008, 15, 8},
	}
	for _, tt := range tests {
		if got := width(tt.addr, tt.rem); got != tt.want {
			t.Errorf("width(%#x, %d) = %d, want %d", tt.addr, tt.rem, got, tt.want)
		}
	}
}

// TestKernels checks every available kernel against copy over sizes and
// both-side misalignments.
func TestKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := newBench(r, 1<<20+1)
	type span struct {
		name    string
		sizes   []int
		devOffs func(n int) []int
		hostOff func(n, dev int) []int
	}
	var small, medium []int
	for n := 0; n <= 256; n++ {
		if n <= 64 {
			small = append(small, n)
		} else {
			medium = append(medium, n)
		}
	}
	spans := []span{
		// Every pair of offsets up to 16 bytes.
		{"0-64", small, func(int) []int { return offsets() }, func(n, dev int) []int {
			if n <= 16 {
				return offsets()
			}
			return hostOffsets(n, dev)
		}},
		{"65-256", medium, func(int) []int { return offsets() }, hostOffsets},
		{"sampled", sweepSizes(), func(n int) []int {
			if n > 64<<10+1 {
				return []int{0, 1, 2, 4, 8, 15, 16, 17, 32, 48, 63}
			}
			return offsets()
		}, func(n, dev int) []int {
			if n > 4096 {
				return []int{(dev*13 + n) % 64, 63 - dev}
			}
			return []int{0, 33, 63, (dev*7 + n) % 64}
		}},
	}
	if raceEnabled {
		// The race detector slows the pure-Go kernel and this harness
		// tenfold; keep one host offset per case.
		for i := range spans {
			hostOff := spans[i].hostOff
			spans[i].hostOff = func(n, dev int) []int { return hostOff(n, dev)[:1] }
		}
	}
	for _, k := range kernels(t) {
		t.Run(k.name, func(t *testing.T) {
			for _, sp := range spans {
				for _, n := range sp.sizes {
					for _, dev := range sp.devOffs(n) {
						for _, host := range sp.hostOff(n, dev) {
							do, so := dev, host
							if !k.deviceIsDst {
								do, so = host, dev
							}
							if err := b.check(k.fn, n, do, so); err != nil {
								t.Fatalf("%s: %v", sp.name, err)
							}
						}
					}
				}
			}
		})
	}
}

// TestLengths checks that every kernel copies min(len(dst), len(src))
// bytes, like copy, and never touches dst past that.
func TestLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	tests := []struct {
		name           string
		dstLen, srcLen int
	}{
		{"both empty", 0, 0},
		{"empty dst", 0, 100},
		{"empty src", 100, 0},
		{"short dst", 37, 200},
		{"short src", 200, 37},
		{"long equal", 5000, 5000},
		{"long dst", 5003, 4099},
		{"long src", 4099, 5003},
	}
	for _, k := range kernels(t) {
		for _, tt := range tests {
			src := randomData(r, tt.srcLen)
			buf := bytes.Repeat([]byte{guardByte}, tt.dstLen+guardLen)
			dst := buf[:tt.dstLen]
			n := min(tt.dstLen, tt.srcLen)
			if got := k.fn(dst, src); got != n {
				t.Errorf("%s %s: returned %d, want %d", k.name, tt.name, got, n)
			}
			if !bytes.Equal(dst[:n], src[:n]) {
				t.Errorf("%s %s: data differs", k.name, tt.name)
			}
			if bytes.Count(buf[n:], []byte{guardByte}) != len(buf)-n {
				t.Errorf("%s %s: wrote past min(len(dst), len(src))", k.name, tt.name)
			}
		}
	}
	if got := ToDevice(nil, nil); got != 0 {
		t.Errorf("ToDevice(nil, nil) = %d", got)
	}
	if got := FromDevice(nil, []byte{1}); got != 0 {
		t.Errorf("FromDevice(nil, x) = %d", got)
	}
}

// TestAPI checks ToDevice and FromDevice themselves on a few shapes.
func TestAPI(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	b := newBench(r, 70000)
	for _, fn := range []struct {
		name string
		fn   func(dst, src []byte) int
	}{{"ToDevice", ToDevice}, {"FromDevice", FromDevice}} {
		for _, n := range []int{0, 1, 7, 15, 16, 63, 64, 65, 4095, 4096, 65537} {
			for _, off := range []int{0, 1, 3, 8, 17, 63} {
				if err := b.check(fn.fn, n, off, 63-off); err != nil {
					t.Errorf("%s: %v", fn.name, err)
				}
			}
		}
	}
}

// choose is the rule Variants documents: the first available variant with
// a kernel for the direction wins.
func choose(vs []Variant, skip map[string]bool) (to, from string) {
	for _, v := range vs {
		if !v.Available || skip[v.Name] {
			continue
		}
		if to == "" && v.ToDevice != nil {
			to = v.Name
		}
		if from == "" && v.FromDevice != nil {
			from = v.Name
		}
	}
	return to, from
}

// TestSelected checks that the dispatch agrees with the registry's order.
func TestSelected(t *testing.T) {
	to, from := Selected()
	wantTo, wantFrom := choose(Variants(), nil)
	if to != wantTo || from != wantFrom {
		t.Errorf("Selected() = %s, %s; registry order gives %s, %s", to, from, wantTo, wantFrom)
	}
	if v := Variants(); v[len(v)-1].Name != "generic" || !v[len(v)-1].Available {
		t.Errorf("last variant is %+v, want an available generic", v[len(v)-1])
	}
}

// selectedEnv makes TestSelectedHelper print the selection for
// TestGODEBUG's subprocess.
const selectedEnv = "WCCOPY_PRINT_SELECTED"

func TestSelectedHelper(t *testing.T) {
	if os.Getenv(selectedEnv) != "1" {
		t.Skip("subprocess helper for TestGODEBUG")
	}
	to, from := Selected()
	fmt.Printf("selected %s %s\n", to, from)
}

// TestGODEBUG checks in a subprocess that each GODEBUG cpu option steers
// the dispatch away from the kernels that need the feature it turns off.
func TestGODEBUG(t *testing.T) {
	tests := []struct {
		godebug string
		off     []string // variants the setting must disable
	}{
		{"", nil},
		{"cpu.avx2=off", []string{"movdir64b", "avx2"}},
		{"cpu.avx=off", []string{"movdir64b", "avx2"}},
		{"cpu.sse41=off", []string{"sse41"}},
		{"cpu.avx2=off,cpu.sse41=off", []string{"movdir64b", "avx2", "sse41"}},
		{"cpu.all=off", []string{"movdir64b", "avx2", "sse41", "neon"}},
		{"cpu.asimd=off", []string{"neon"}},
	}
	for _, tt := range tests {
		t.Run(tt.godebug, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSelectedHelper$", "-test.count=1")
			// Keep the settings this process runs under: Variants below
			// reflects them.
			godebug := os.Getenv("GODEBUG")
			if tt.godebug != "" {
				godebug = strings.TrimPrefix(godebug+","+tt.godebug, ",")
			}
			cmd.Env = append(os.Environ(), selectedEnv+"=1", "GODEBUG="+godebug)
			out, err := cmd.CombinedOutput()
			if errors.Is(err, syscall.ENOEXEC) {
				// An emulator without binfmt_misc (qemu-user run by hand)
				// cannot start this binary again.
				t.Skipf("cannot run this test binary as a subprocess: %v", err)
			}
			if err != nil {
				t.Fatalf("subprocess: %v\n%s", err, out)
			}
			var to, from string
			for line := range strings.Lines(string(out)) {
				if _, err := fmt.Sscanf(line, "selected %s %s", &to, &from); err == nil {
					break
				}
			}
			skip := map[string]bool{}
			for _, name := range tt.off {
				skip[name] = true
			}
			wantTo, wantFrom := choose(Variants(), skip)
			if to != wantTo || from != wantFrom {
				t.Errorf("GODEBUG=%s selects %q, %q; want %q, %q\n%s", godebug, to, from, wantTo, wantFrom, out)
			}
		})
	}
}

// fuzzKernels runs every available kernel in one direction on the fuzzer's
// input and compares it with copy.
func fuzzKernels(f *testing.F, toDevice bool) {
	f.Add([]byte("hello, device"), uint8(3), uint8(5), uint16(13))
	f.Add(bytes.Repeat([]byte{1, 2, 3}, 400), uint8(63), uint8(0), uint16(1000))
	f.Fuzz(func(t *testing.T, data []byte, dstOff, srcOff uint8, dstLen uint16) {
		for i := range data {
			if data[i] == guardByte {
				data[i] = ^guardByte
			}
		}
		do, so := int(dstOff%64), int(srcOff%64)
		dl := int(dstLen)
		for _, v := range Variants() {
			fn := v.FromDevice
			if toDevice {
				fn = v.ToDevice
			}
			if !v.Available || fn == nil {
				continue
			}
			sbuf := aligned(so + len(data))
			src := sbuf[so:]
			copy(src, data)
			dbuf := aligned(2*guardLen + do + dl)
			for i := range dbuf {
				dbuf[i] = guardByte
			}
			dst := dbuf[guardLen+do : guardLen+do+dl : guardLen+do+dl]
			want := make([]byte, dl)
			for i := range want {
				want[i] = guardByte
			}
			wantN := copy(want, src)
			if n := fn(dst, src); n != wantN {
				t.Fatalf("%s: returned %d, copy returns %d", v.Name, n, wantN)
			}
			if !bytes.Equal(dst, want) {
				t.Fatalf("%s: dst differs from copy's result", v.Name)
			}
			if bytes.Count(dbuf, []byte{guardByte}) != len(dbuf)-wantN {
				t.Fatalf("%s: guard bytes overwritten", v.Name)
			}
		}
	})
}

func FuzzToDevice(f *testing.F) { fuzzKernels(f, true) }

func FuzzFromDevice(f *testing.F) { fuzzKernels(f, false) }
