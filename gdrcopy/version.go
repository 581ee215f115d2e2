package gdrcopy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

// Version is a GDRCopy version word, (major << 16) | minor, as reported by
// the GET_VERSION ioctl (gdrdrv.h GDRDRV_VERSION, gdrapi.h GDR_API_VERSION).
type Version uint32

// APIVersion is the libgdrapi version whose behaviour this package
// implements (gdrapi.h GDR_API_VERSION, 2.6). Open refuses a driver whose
// minimum library version is newer.
const APIVersion Version = 2<<16 | 6

// MinimumDriverVersion is the oldest gdrdrv this package accepts (gdrapi.h
// MINIMUM_GDRDRV_VERSION, 2.0).
const MinimumDriverVersion Version = 2 << 16

// NewVersion returns the version word of major.minor.
func NewVersion(major, minor uint16) Version {
	return Version(uint32(major)<<gdrdrv.MajorVersionShift | uint32(minor))
}

// Major returns the major version.
func (v Version) Major() uint16 { return uint16(v >> gdrdrv.MajorVersionShift) }

// Minor returns the minor version.
func (v Version) Minor() uint16 { return uint16(v & gdrdrv.MinorVersionMask) }

// String returns "major.minor", the form of gdrdrv.h GDRDRV_VERSION_STRING
// and of /sys/module/gdrdrv/version.
func (v Version) String() string {
	return strconv.Itoa(int(v.Major())) + "." + strconv.Itoa(int(v.Minor()))
}

// ParseVersion parses "major.minor" in decimal, as found in
// /sys/module/gdrdrv/version and on the Version line of
// /proc/driver/gdrdrv/params. Both parts must fit in 16 bits.
func ParseVersion(s string) (Version, error) {
	maj, min, ok := strings.Cut(s, ".")
	if !ok {
		return 0, fmt.Errorf("gdrcopy: version %q: want major.minor", s)
	}
	major, err := parseVersionPart(maj)
	if err != nil {
		return 0, fmt.Errorf("gdrcopy: version %q: major: %w", s, err)
	}
	minor, err := parseVersionPart(min)
	if err != nil {
		return 0, fmt.Errorf("gdrcopy: version %q: minor: %w", s, err)
	}
	return NewVersion(major, minor), nil
}

func parseVersionPart(s string) (uint16, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%q out of range", s)
	}
	return uint16(n), nil
}

// checkVersions applies the checks of gdrapi.c gdr_open_gdrdrv_internal to
// the answer of GET_VERSION.
func checkVersions(driver, minimumAPI Version) error {
	if driver < MinimumDriverVersion {
		return fmt.Errorf("%w: gdrdrv %s is older than %s, the oldest this package supports; install GDRCopy %s or later",
			ErrNotSupported, driver, MinimumDriverVersion, MinimumDriverVersion)
	}
	if minimumAPI > APIVersion {
		return fmt.Errorf("%w: gdrdrv %s needs a client of version %s or later, and this package implements %s",
			ErrNotSupported, driver, minimumAPI, APIVersion)
	}
	return nil
}

// Driver versions that gate commands (gdrdrv.h
// GDRDRV_MINIMUM_VERSION_WITH_*).
const (
	versionGetInfoV2      = Version(gdrdrv.MinimumVersionWithGetInfoV2)
	versionGetAttr        = Version(gdrdrv.MinimumVersionWithGetAttr)
	versionPinBufferV2    = Version(gdrdrv.MinimumVersionWithPinBufferV2)
	versionReqMappingType = Version(gdrdrv.MinimumVersionWithReqMappingType)
)
