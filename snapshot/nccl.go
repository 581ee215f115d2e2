package snapshot

import (
	"archive/tar"
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
)

// What 'p2pcheck nccl' reads beside the PCI tree (the sysfs classes of
// Documentation/ABI/testing/sysfs-class-net and sysfs-class-infiniband), and the
// member holding the facts of the host the caller recorded.
const (
	classNet        = "sys/class/net"
	classInfiniband = "sys/class/infiniband"
	ncclMember      = "p2pkit/nccl.json"
	// ncclConfLimit is what NCCL reads of a configuration file, and what
	// 'p2pcheck nccl' does (nccl.ParseConf).
	ncclConfLimit = 1 << 20
)

// ncclFacts captures what NCCL's view of the machine needs beyond the PCI tree:
// each network interface's link in /sys/class/net, its device link, speed and
// the device's subsystem link (ncclNetSocketGetPciPath and ncclTopoGetSubsystem
// resolve them); each RDMA device's link in /sys/class/infiniband and its ports'
// rate, state and link layer; the NCCL configuration files opt.NCCLConf names;
// and opt.NCCL as p2pkit/nccl.json.
func (c *capture) ncclFacts(opt Options) {
	c.classLinks(classNet, c.netInterface)
	c.classLinks(classInfiniband, c.rdmaDevice)
	for _, f := range opt.NCCLConf {
		if f = strings.TrimPrefix(path.Clean("/"+f), "/"); f != "" {
			c.file(f, ncclConfLimit)
		}
	}
	if opt.NCCL != nil {
		c.add(ncclMember, &member{typ: tar.TypeReg, perm: 0o644, data: opt.NCCL})
	}
}

// classLinks records each link of the class directory dir and calls each with
// the directory it leads to.
func (c *capture) classLinks(dir string, each func(target string)) {
	ents, err := c.src.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.skip(hostfs.PathError("readdir", dir, err))
		}
		return
	}
	c.dir(dir)
	for _, e := range ents {
		name := join(dir, e.Name)
		if e.Type&fs.ModeSymlink == 0 {
			continue
		}
		c.link(name)
		target, err := c.src.LinkTarget(name)
		if err != nil {
			c.skip(err)
			continue
		}
		c.dir(target)
		each(target)
	}
}

// netInterface captures an interface's device link and speed, and the device's
// subsystem link. Virtual interfaces have no device; many have no speed (reading
// it fails with EINVAL when the link is down or unknown), which NCCL then takes
// as 10 Gb/s: an unreadable speed is left out without complaint.
func (c *capture) netInterface(dir string) {
	dev := join(dir, "device")
	if fi, err := c.src.Lstat(dev); err == nil && fi.Mode&fs.ModeSymlink != 0 {
		c.link(dev)
		if target, err := c.src.LinkTarget(dev); err == nil {
			c.dir(target)
			if sub := join(target, "subsystem"); c.isLink(sub) {
				c.link(sub)
			}
		}
	}
	c.optional(join(dir, "speed"))
}

// rdmaDevice captures each port's rate, state, physical state and link layer.
func (c *capture) rdmaDevice(dir string) {
	ports := join(dir, "ports")
	ents, err := c.src.ReadDir(ports)
	if err != nil {
		return
	}
	c.dir(ports)
	for _, e := range ents {
		for _, f := range []string{"rate", "state", "phys_state", "link_layer"} {
			c.optional(join(ports, e.Name, f))
		}
	}
}

func (c *capture) isLink(name string) bool {
	fi, err := c.src.Lstat(name)
	return err == nil && fi.Mode&fs.ModeSymlink != 0
}

// optional copies the regular attribute file name when it can be read.
func (c *capture) optional(name string) {
	fi, err := c.src.Lstat(name)
	if err != nil || !fi.Mode.IsRegular() {
		return
	}
	if b, err := c.src.ReadFile(name, attrLimit); err == nil {
		c.add(name, &member{typ: tar.TypeReg, perm: fi.Mode.Perm(), data: b})
	}
}

// RecordedNCCL returns the host facts a snapshot recorded for 'p2pcheck nccl' (a
// JSON document, see Options.NCCL), nil when it has none.
func RecordedNCCL(root hostfs.Root) ([]byte, error) {
	b, err := root.ReadFile(ncclMember, procLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
