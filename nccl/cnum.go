package nccl

import "math"

// strtoll parses s as C's strtoll(s, NULL, 0) does on Linux: leading spaces, an
// optional sign, then a hexadecimal ("0x"), octal ("0") or decimal number, stopping
// at the first character that does not belong; no digits gives 0. overflow reports
// a value clamped to the int64 range (errno ERANGE in C).
func strtoll(s string) (v int64, overflow bool) {
	i, neg := cSign(s)
	base, i := cBase(s, i)
	u, overflow := cDigits(s[i:], base)
	switch {
	case !neg && (overflow || u > math.MaxInt64):
		return math.MaxInt64, true
	case neg && (overflow || u > 1<<63):
		return math.MinInt64, true
	case neg:
		return -int64(u), false
	}
	return int64(u), false
}

// cSign skips strtoll's leading white space (isspace: ' ', '\t' to '\r') and an
// optional sign, returning the index after them and whether the sign was '-'.
func cSign(s string) (i int, neg bool) {
	for i < len(s) && (s[i] == ' ' || s[i] >= '\t' && s[i] <= '\r') {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	return i, neg
}

// cBase is strtoll's base 0 at s[i:]: "0x" followed by a hexadecimal digit is
// 16 (the prefix skipped), a leading "0" is 8, anything else 10.
func cBase(s string, i int) (base uint64, next int) {
	switch {
	case i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && i+2 < len(s) && digit(s[i+2]) < 16:
		return 16, i + 2
	case i < len(s) && s[i] == '0':
		return 8, i
	}
	return 10, i
}

// cDigits accumulates the digits of base at the start of s, up to the first
// character that is not one; overflow reports a value past uint64.
func cDigits(s string, base uint64) (u uint64, overflow bool) {
	for i := 0; i < len(s); i++ {
		d := digit(s[i])
		if d >= base {
			break
		}
		if u > (math.MaxUint64-d)/base {
			overflow = true
			continue
		}
		u = u*base + d
	}
	return u, overflow
}

// atoi is strtol(s, NULL, 0) stored in a C int, as NCCL's xmlGetAttrInt does.
func atoi(s string) int {
	v, _ := strtoll(s)
	return int(int32(v))
}

func digit(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'z':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return uint64(c-'A') + 10
	}
	return 99
}

// busIDToInt64 is busIdToInt64 (src/misc/utils.cc): the hexadecimal digits of a
// PCI bus ID, ':' and '.' skipped, up to 16 digits and the first other character,
// read as one number ("0000:00:06.0" is 0x60).
func busIDToInt64(s string) int64 {
	var u uint64
	n := 0
	for i := 0; i < len(s) && n < 16; i++ {
		c := s[i]
		if c == '.' || c == ':' {
			continue
		}
		d := digit(c)
		if d >= 16 {
			break
		}
		u = u<<4 | d
		n++
	}
	if u > math.MaxInt64 {
		return math.MaxInt64 // strtol saturates
	}
	return int64(u)
}
