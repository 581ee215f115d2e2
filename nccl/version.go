package nccl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Version is an NCCL release, e.g. 2.28.9.
type Version struct {
	Major, Minor, Patch int
}

// ErrBadVersion is returned (wrapped) for a version string that is not X.Y[.Z].
var ErrBadVersion = errors.New("nccl: bad version")

// DefaultVersion is the release whose defaults apply when neither libnccl nor
// --nccl-version names one: the release the rules were checked against.
var DefaultVersion = Version{2, 28, 9}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// IsZero reports whether v is unset.
func (v Version) IsZero() bool { return v == Version{} }

// AtLeast reports whether v is major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

var versionRE = lazyRegexp(`^(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?(?:-\d+)?(?:\+\S*)?$`)

// ParseVersion reads "2.28.9", "2.28", "2.28.9-1" (a release tag) or
// "2.28.9+cuda13.0" (NCCL's own banner).
func ParseVersion(s string) (Version, error) {
	m := versionRE().FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("%w: %q (want X.Y or X.Y.Z, e.g. 2.28.9)", ErrBadVersion, s)
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.Patch, _ = strconv.Atoi(m[3])
	}
	return v, nil
}

// banner is what init.cc's VERSION_STRING expands to inside libnccl: "NCCL version
// 2.28.9+cuda13.0" (STR(NCCL_MAJOR) "." STR(NCCL_MINOR) "." STR(NCCL_PATCH) ...).
var banner = []byte("NCCL version ")

// maxLibBytes bounds how much of a library FindVersion reads (libnccl.so is a few
// hundred megabytes).
const maxLibBytes = 2 << 30

// FindVersion scans a libnccl.so image for its version banner without loading it.
// ok is false when the banner is absent.
func FindVersion(r io.Reader) (v Version, ok bool, err error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxLibBytes), 1<<20)
	var carry []byte
	buf := make([]byte, 1<<20)
	for {
		n, rerr := br.Read(buf)
		chunk := append(carry, buf[:n]...)
		for off := 0; ; {
			i := bytes.Index(chunk[off:], banner)
			if i < 0 {
				break
			}
			start := off + i + len(banner)
			end := start
			for end < len(chunk) && end-start < 32 && isVersionByte(chunk[end]) {
				end++
			}
			if end < len(chunk) || rerr != nil {
				if v, err := ParseVersion(string(chunk[start:end])); err == nil {
					return v, true, nil
				}
			} else {
				// The banner may continue in the next chunk.
				break
			}
			off = start
		}
		if rerr == io.EOF {
			return Version{}, false, nil
		}
		if rerr != nil {
			return Version{}, false, rerr
		}
		keep := min(len(chunk), len(banner)+32)
		carry = append(carry[:0:0], chunk[len(chunk)-keep:]...)
	}
}

func isVersionByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == '+' || c == '-' || c >= 'a' && c <= 'z'
}
