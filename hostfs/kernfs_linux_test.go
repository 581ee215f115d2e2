package hostfs

import (
	"errors"
	"os"
	"path"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// liveSysfs returns the root "/" when /sys is a mounted sysfs, and otherwise skips
// the test, or fails it under P2PKIT_REQUIRE_HW=1.
func liveSysfs(t *testing.T) Root {
	t.Helper()
	if !isSysfs("/sys") {
		const msg = "/sys is not a mounted sysfs"
		if os.Getenv("P2PKIT_REQUIRE_HW") == "1" {
			t.Fatalf("P2PKIT_REQUIRE_HW=1 but %s", msg)
		}
		t.Skip(msg)
	}
	root, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// read is what one read of a name gave, for comparing two ways of reading it.
type read struct {
	Data string
	Perm uint32
	Err  string
}

func readBoth(r Root, name string) (plain, withPerm read) {
	buf := make([]byte, 4097)
	n, err := r.Read(name, buf, false)
	plain = read{Data: string(buf[:n]), Err: errText(err)}
	n, perm, err := r.ReadPerm(name, buf, false)
	withPerm = read{Data: string(buf[:n]), Perm: uint32(perm), Err: errText(err)}
	return plain, withPerm
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// kernfsAttrs are attributes of a PCI function read in both ways: files of every
// kind of kernfs node (regular attributes, a binary one, a directory, links) and
// absent names. None has side effects (resourceN, rom and reset are never read).
var kernfsAttrs = []string{"vendor", "device", "class", "revision", "subsystem_vendor", "subsystem_device",
	"config", "numa_node", "resource", "local_cpulist", "irq", "modalias", "enable", "power", "driver",
	"subsystem", "iommu_group", "no_such_attribute", "physfn"}

// TestKernfsReads: on a mounted sysfs a file is opened without a look first
// (openat2 with RESOLVE_NO_XDEV, then read), and gives exactly what the careful way
// (lstat, open, fstat) gives: data, permission bits, and errors for directories,
// links and absent names. A mount inside sysfs (/sys/fs/cgroup) is not taken for
// sysfs, and without openat2 nothing is.
func TestKernfsReads(t *testing.T) {
	root := liveSysfs(t)
	fns, err := root.Names("sys/bus/pci/devices")
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) == 0 {
		t.Skip("no PCI functions in /sys/bus/pci/devices")
	}
	for _, fn := range fns[:min(len(fns), 16)] {
		dir, err := root.LinkTarget(path.Join("sys/bus/pci/devices", fn))
		if err != nil {
			t.Fatal(err)
		}
		fast := subTree(t, root, dir)
		if !fast.t.(*fdTree).kernfs {
			t.Fatalf("%s: not taken for sysfs", dir)
		}
		careful := subTree(t, root, dir)
		careful.t.(*fdTree).kernfs = false
		for _, name := range kernfsAttrs {
			fp, fw := readBoth(fast, name)
			cp, cw := readBoth(careful, name)
			if diff := cmp.Diff(cp, fp); diff != "" {
				t.Errorf("%s/%s: Read (-careful +kernfs):\n%s", dir, name, diff)
			}
			if diff := cmp.Diff(cw, fw); diff != "" {
				t.Errorf("%s/%s: ReadPerm (-careful +kernfs):\n%s", dir, name, diff)
			}
		}
	}

	t.Run("mount inside sysfs", func(t *testing.T) {
		var st unix.Statfs_t
		if unix.Statfs("/sys/fs/cgroup", &st) != nil || st.Type == unix.SYSFS_MAGIC {
			t.Skip("nothing is mounted on /sys/fs/cgroup")
		}
		fs := subTree(t, root, "sys/fs")
		if !fs.t.(*fdTree).kernfs {
			t.Fatal("/sys/fs: not taken for sysfs")
		}
		cg := subTree(t, fs, "cgroup")
		if cg.t.(*fdTree).kernfs {
			t.Error("/sys/fs/cgroup, another file system mounted in sysfs, taken for sysfs")
		}
	})

	t.Run("no openat2", func(t *testing.T) {
		noOpenat2.Store(true)
		t.Cleanup(func() { noOpenat2.Store(false) })
		sys := subTree(t, root, "sys")
		dev := subTree(t, sys, "devices")
		if dev.t.(*fdTree).kernfs {
			t.Error("/sys/devices taken for sysfs, opened without openat2")
		}
		if _, err := dev.Names("."); err != nil {
			t.Error(err)
		}
	})
}

func subTree(t *testing.T, r Root, name string) Root {
	t.Helper()
	s, err := r.Sub(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, ok := s.t.(*fdTree); !ok {
		t.Fatalf("%s: opened as %T, not as a descriptor", name, s.t)
	}
	return s
}

// TestKernfsDirectoryRead: a directory opened on sysfs without a look is refused
// by the read with the error the careful way gives before opening it.
func TestKernfsDirectoryRead(t *testing.T) {
	root := liveSysfs(t)
	sys := subTree(t, root, "sys")
	_, err := sys.Read("devices", make([]byte, 16), false)
	if !errors.Is(err, errIsDir) {
		t.Errorf("Read(/sys/devices) = %v, want %v", err, errIsDir)
	}
}
