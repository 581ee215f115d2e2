package procfs

import (
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/kversion"
)

// This file reads /proc/version, which fs/proc/version.c version_proc_show prints
// (linux_proc_banner, init/version.c).

// KernelVersion reads /proc/version.
func (fsys FS) KernelVersion() (kversion.Version, error) {
	b, err := fsys.r.ReadFile("proc/version", procLimit)
	if err != nil {
		return kversion.Version{}, err
	}
	v, err := parseProcVersion(b)
	if err != nil {
		return kversion.Version{}, hostfs.PathError("parse", "proc/version", err)
	}
	return v, nil
}

// parseProcVersion parses /proc/version (fs/proc/version.c, linux_proc_banner):
// "Linux version <release> (<builder>) ...".
func parseProcVersion(b []byte) (kversion.Version, error) {
	f := strings.Fields(string(b))
	if len(f) < 3 || f[0] != "Linux" || f[1] != "version" {
		return kversion.Version{}, fmt.Errorf("want \"Linux version <release>\", got %.40q", string(b))
	}
	return kversion.Parse(f[2])
}
