// Package kversion parses and compares Linux kernel release strings ("6.12.117-amd64",
// "6.18.0-rc3+", "6.1") as uname -r and /proc/version print them. It does no I/O:
// package procfs reads the running kernel's release from /proc/version, package p2pdma
// keys its host-bridge whitelist on the release series.
//
// A release is "major.minor[.patch][extra]" (the top-level Makefile's VERSION,
// PATCHLEVEL, SUBLEVEL and EXTRAVERSION, joined by scripts/setlocalversion into
// UTS_RELEASE).
package kversion

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
)

// ErrSyntax is wrapped by every error of [Parse].
var ErrSyntax = errors.New("kversion: invalid kernel release")

// Version is a Linux kernel release. The zero Version means unknown.
type Version struct {
	// Release is the string the version was parsed from ("6.1.0-28-amd64"); empty
	// for a Version built from numbers.
	Release string
	// Major, Minor and Patch are the leading numbers: VERSION, PATCHLEVEL and
	// SUBLEVEL. Patch is 0 when the release has none ("6.12-rc3").
	Major, Minor, Patch int
}

// Bounds on the numbers Parse accepts: the major and minor numbers of every release
// so far have one or two digits; a sublevel has grown past 255 (4.9.337), so it is
// bounded only to fit any int.
const (
	maxMajorMinor = 99
	maxPatchLen   = 9
)

// Parse parses the leading "major.minor" and, when present, ".patch" of a kernel
// release. Anything after the last number read is kept in Release only. The major
// number must be 1 to 99 and stand alone before the first dot, the minor number 0 to
// 99, the patch at most nine digits.
func Parse(release string) (Version, error) {
	fail := func() (Version, error) {
		return Version{}, fmt.Errorf("%w %.40q: want major.minor", ErrSyntax, release)
	}
	v := Version{Release: release}
	major, rest, ok := number(release, 2)
	if !ok || major < 1 || major > maxMajorMinor || len(rest) == 0 || rest[0] != '.' {
		return fail()
	}
	minor, rest, ok := number(rest[1:], 2)
	if !ok || minor > maxMajorMinor || (len(rest) > 0 && isDigit(rest[0])) {
		return fail()
	}
	v.Major, v.Minor = major, minor
	if len(rest) > 1 && rest[0] == '.' && isDigit(rest[1]) {
		patch, after, _ := number(rest[1:], maxPatchLen)
		if len(after) > 0 && isDigit(after[0]) {
			return fail()
		}
		v.Patch = patch
	}
	return v, nil
}

// number reads the run of at most n decimal digits at the start of s; ok is false
// when there is none.
func number(s string, n int) (v int, rest string, ok bool) {
	end := 0
	for end < len(s) && end < n && isDigit(s[end]) {
		end++
	}
	if end == 0 {
		return 0, s, false
	}
	v, err := strconv.Atoi(s[:end])
	return v, s[end:], err == nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// IsZero reports whether v is the zero Version, unknown.
func (v Version) IsZero() bool { return v == Version{} }

// Series returns v's release series, major.minor, with no patch and no Release.
func (v Version) Series() Version { return Version{Major: v.Major, Minor: v.Minor} }

// Compare returns -1, 0 or +1 as v is older than, the same as, or newer than w,
// comparing major, minor and patch numbers; Release is not compared.
func (v Version) Compare(w Version) int {
	return cmp.Or(cmp.Compare(v.Major, w.Major), cmp.Compare(v.Minor, w.Minor), cmp.Compare(v.Patch, w.Patch))
}

// AtLeast reports whether v is release series major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// String returns "major.minor", or "major.minor.patch" when the patch is not 0, or
// "unknown" for the zero Version. Release is not printed: read it directly.
func (v Version) String() string {
	if v.IsZero() {
		return "unknown"
	}
	s := strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor)
	if v.Patch != 0 {
		s += "." + strconv.Itoa(v.Patch)
	}
	return s
}
