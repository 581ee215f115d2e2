package hostfs

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"runtime"
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
	n, perm, err := r.ReadListed(name, buf, false)
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
				t.Errorf("%s/%s: ReadListed (-careful +kernfs):\n%s", dir, name, diff)
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
		if got, want := dev.t.(*fdTree).sys, (sysCalls{raw: true}); got != want {
			t.Errorf("/sys/devices opened without openat2: calls %+v, want %+v (its file system looked at: a sysfs read is never raw)", got, want)
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

// TestKernfsMountedOver: an attribute another file is mounted over is not read the
// kernfs way. In a mount namespace of its own (as root), a regular file mounted over
// numa_node is read, after the careful look, as that file, and /dev/null mounted over
// resource is refused without being opened. The namespace is the calling thread's
// (unshare(2) on a locked thread, which the runtime discards when the goroutine
// ends), so the machine's mounts are never touched.
func TestKernfsMountedOver(t *testing.T) {
	liveSysfs(t)
	if os.Geteuid() != 0 {
		const msg = "needs root for a mount namespace of its own"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	file := filepath.Join(t.TempDir(), "numa_node")
	if err := os.WriteFile(file, []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("making / private: %v", err)
			return
		}
		// Opened in the new namespace: a descriptor from before would walk the
		// old one's mounts.
		root, err := Open("/")
		if err != nil {
			t.Error(err)
			return
		}
		defer root.Close()
		mountedOver(t, root, file)
	}()
	<-done
}

func mountedOver(t *testing.T, root Root, file string) {
	fns, err := root.Names("sys/bus/pci/devices")
	if err != nil || len(fns) == 0 {
		t.Errorf("no PCI functions: %v", err)
		return
	}
	dir, err := root.LinkTarget(path.Join("sys/bus/pci/devices", fns[0]))
	if err != nil {
		t.Error(err)
		return
	}
	for _, m := range [][2]string{{file, "numa_node"}, {"/dev/null", "resource"}} {
		if err := unix.Mount(m[0], filepath.Join("/", dir, m[1]), "", unix.MS_BIND, ""); err != nil {
			t.Errorf("mount --bind %s over %s: %v", m[0], m[1], err)
			return
		}
	}
	d, err := root.Sub(dir)
	if err != nil {
		t.Error(err)
		return
	}
	defer d.Close()
	if ft, ok := d.t.(*fdTree); !ok || !ft.kernfs {
		t.Errorf("%s: not taken for sysfs", dir)
		return
	}
	buf := make([]byte, 64)
	n, perm, err := d.ReadListed("numa_node", buf, false)
	if err != nil || string(buf[:n]) != "7\n" || perm != 0o644 {
		t.Errorf("numa_node with a file mounted over it: %q, %v, %v; want the file's \"7\\n\", -rw-r--r--", buf[:n], perm, err)
	}
	for _, read := range []func() error{
		func() error { _, err := d.Read("resource", buf, false); return err },
		func() error { _, _, err := d.ReadListed("resource", buf, false); return err },
	} {
		if err := read(); !errors.Is(err, ErrNotFile) {
			t.Errorf("resource with /dev/null mounted over it: %v, want %v", err, ErrNotFile)
		}
	}
}
