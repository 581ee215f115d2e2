package main

import (
	"path"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
)

// The kinds of file p2pcheck reads whole outside sysfs and /proc, each with the
// most bytes of it that are read (hostfs.Kind): a longer file is an error naming
// the kind and its limit. Each limit is far above what a real file needs.
var (
	kindConfig   = hostfs.Kind{Name: "p2pcheck configuration file", Limit: 64 << 10}
	kindNCCLConf = hostfs.Kind{Name: "NCCL configuration file", Limit: 1 << 20}
	kindLimits   = hostfs.Kind{Name: "pam_limits configuration file", Limit: 1 << 20}
	kindSystemd  = hostfs.Kind{Name: "systemd configuration file", Limit: 1 << 20}
	kindTextfile = hostfs.Kind{Name: "previous --prometheus textfile", Limit: 16 << 20}
	// libnccl.so is a few hundred megabytes, most of it device code, which the
	// linker places after the host code's read-only data and so after the
	// version banner (a string of init.cc): the banner is found long before this.
	kindLibNCCL = hostfs.Kind{Name: "libnccl.so", Limit: 256 << 20}
)

// maxLibSearch bounds the bytes the whole libnccl.so search reads: two
// candidates read to their limit.
const maxLibSearch = 2 * (256 << 20)

// maxDropIns bounds the files one drop-in directory (limits.d/*.conf,
// system.conf.d/*.conf) or one library pattern contributes.
const maxDropIns = 1000

// openRun opens the run's root directory (--root, "/" by default) for the files
// read beside sysfs, counting on the run's budget. The caller closes it.
func (o *globalOptions) openRun() (hostfs.Root, error) {
	r, err := hostfs.Open(o.root)
	if err != nil {
		return hostfs.Root{}, err
	}
	return r.WithMeter(o.reads), nil
}

// readUnder reads the file name below the run's root, a file of kind k
// (hostfs.Root.ReadKind: confined to the root, regular files only).
func (o *globalOptions) readUnder(name string, k hostfs.Kind) ([]byte, error) {
	r, err := o.openRun()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadKind(name, k)
}

// readNCCLConf reads an NCCL configuration file NCCL would read (nccl.ConfPaths):
// below --root, confined to it; on the live machine, /etc/nccl.conf below "/" and a
// file the environment or the home directory names as a file the user named.
func (o *globalOptions) readNCCLConf(p string) ([]byte, error) {
	if o.root == "/" && p != "/etc/nccl.conf" {
		return hostfs.ReadNamed(o.reads, p, kindNCCLConf)
	}
	return o.readUnder(strings.TrimPrefix(path.Clean(p), "/"), kindNCCLConf)
}
