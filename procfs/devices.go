package procfs

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
)

// This file reads the character device majors of /proc/devices, which
// fs/proc/devices.c devinfo_show prints with fs/char_dev.c chrdev_show, and describes
// the device nodes under /dev they number.

// CharDevice is one entry of the "Character devices:" part of /proc/devices.
type CharDevice struct {
	Major uint32
	Name  string // e.g. "gdrdrv", "nvidia", "nvidia-uvm"
}

// CharDevices reads the character device majors of /proc/devices.
func (fsys FS) CharDevices() ([]CharDevice, error) {
	b, err := fsys.r.ReadFile("proc/devices", procLimit)
	if err != nil {
		return nil, err
	}
	d, err := parseCharDevices(b)
	if err != nil {
		return nil, hostfs.PathError("parse", "proc/devices", err)
	}
	return d, nil
}

// LookupMajor returns the major number registered under name: register_chrdev's name
// (gdrdrv registers "gdrdrv" with a dynamic major). A name can hold several majors;
// the first listed, the lowest, is returned.
func LookupMajor(devs []CharDevice, name string) (major uint32, ok bool) {
	for _, d := range devs {
		if d.Name == name {
			return d.Major, true
		}
	}
	return 0, false
}

// parseCharDevices parses the "Character devices:" part of /proc/devices
// (fs/char_dev.c chrdev_show, "%3d %s").
func parseCharDevices(b []byte) ([]CharDevice, error) {
	devs := []CharDevice{}
	in := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "Character devices:":
			in = true
			continue
		case line == "" || strings.HasSuffix(line, ":"):
			in = false
			continue
		case !in:
			continue
		}
		num, name, ok := strings.Cut(line, " ")
		major, err := strconv.ParseUint(num, 10, 32)
		if !ok || err != nil || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("want \"major name\", got %q", line)
		}
		devs = append(devs, CharDevice{Major: uint32(major), Name: strings.TrimSpace(name)})
	}
	return devs, nil
}

// DevNode describes a device node under /dev.
type DevNode struct {
	Mode fs.FileMode // type and permission bits; a character device has fs.ModeCharDevice
	// Major and Minor are the device number; NumberKnown is false when the node is
	// not a device or its number could not be read (a non-Linux host).
	Major, Minor uint32
	NumberKnown  bool
}

// DevNode describes /dev/<name> without opening it; a link is described, not followed.
func (fsys FS) DevNode(name string) (DevNode, error) {
	if name == "" || strings.Contains(name, "..") {
		return DevNode{}, fmt.Errorf("procfs: bad device node name %q", name)
	}
	p := path.Join("dev", name)
	fi, err := fsys.r.Lstat(p)
	if err != nil {
		return DevNode{}, hostfs.PathError("lstat", p, err)
	}
	return DevNode{Mode: fi.Mode, Major: fi.Major, Minor: fi.Minor, NumberKnown: fi.HasDev}, nil
}
