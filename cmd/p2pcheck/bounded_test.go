package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/provision"
)

// The tests of this file reproduce #21's defects 5-14 at the command line, each
// against what f0912a0 did; internal/atomicfile, hostfs and render test the same
// rules below it.

// finish runs p2pcheck and fails the test when it does not end within a minute:
// f0912a0 blocked for ever on a FIFO.
func finish(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := p2pcheck(args...)
		done <- result{c, o, e}
	}()
	select {
	case r := <-done:
		return r.code, r.stdout, r.stderr
	case <-time.After(time.Minute):
		t.Fatalf("p2pcheck %s: still running after a minute (blocked on a FIFO?)", strings.Join(args, " "))
	}
	return 0, "", ""
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sparse makes a sparse file of size bytes, which costs no disk.
func sparse(t *testing.T, p string, size int64) {
	t.Helper()
	writeFile(t, p, "")
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
}

// zeroNode makes a /dev/zero node at p, or skips where mknod is not allowed.
func zeroNode(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|5); err != nil {
		t.Skipf("mknod: %v", err)
	}
}

// TestRootEtcHostile reproduces #21's defect 5: below --root, f0912a0 read
// limits.conf, limits.d, system.conf and nccl.conf with no size limit and no type
// check (a /dev/zero node: out of memory, exit 2; a 1.5 GB sparse file: 3 GB RSS; a
// FIFO: the report hung). Each is now refused with a warning and the report is
// evaluated.
func TestRootEtcHostile(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	zeroNode(t, filepath.Join(root, "etc/security/limits.d/10-zero.conf"))
	mkfifo(t, filepath.Join(root, "etc/security/limits.conf"))
	sparse(t, filepath.Join(root, "etc/systemd/system.conf"), 1500<<20)
	mkfifo(t, filepath.Join(root, "etc/systemd/system.conf.d/fifo.conf"))
	mkfifo(t, filepath.Join(root, "etc/nccl.conf"))
	code, _, stderr := finish(t, "--root", root, "--no-nvml", "report")
	if code == exitNoEval || code == exitUsage || code == 2 {
		t.Errorf("exit %d, want the report evaluated:\n%s", code, stderr)
	}
	for _, want := range []string{
		"/etc/security/limits.conf: not a regular file",
		"/etc/security/limits.d/10-zero.conf: not a regular file: a device node, FIFO or socket is never opened (a character device)",
		"/etc/systemd/system.conf: file larger than the read limit: 1 MiB (the limit for a systemd configuration file)",
		"/etc/systemd/system.conf.d/fifo.conf: not a regular file",
		"/etc/nccl.conf: not a regular file",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestNCCLRootEscape reproduces #21's defect 8: nccl --root R followed
// R/etc/nccl.conf linked out of R and printed the outside file's NCCL_* lines.
func TestNCCLRootEscape(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	outside := filepath.Join(t.TempDir(), "nccl.conf")
	writeFile(t, outside, "NCCL_OUTSIDE_SECRET=1\n")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "etc/nccl.conf")); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"text", "json"} {
		code, stdout, stderr := finish(t, "--root", root, "--no-nvml", "nccl", "--format", format)
		if code != 0 || strings.Contains(stdout+stderr, "NCCL_OUTSIDE_SECRET") {
			t.Errorf("%s: exit %d, and the outside file's setting shown: %v\n%s", format, code, strings.Contains(stdout+stderr, "NCCL_OUTSIDE_SECRET"), stderr)
		}
	}
}

// TestLibSearchHostile reproduces #21's defect 7: the libnccl.so search below
// --root opened FIFOs (a hang) and read up to 2 GiB of each candidate. A FIFO is
// now left out without blocking, a candidate is read up to kindLibNCCL's limit,
// and names of one file are read once.
func TestLibSearchHostile(t *testing.T) {
	root := t.TempDir()
	mkfifo(t, filepath.Join(root, "usr/lib/libnccl.so.2"))
	sparse(t, filepath.Join(root, "usr/lib64/libnccl.so.2"), kindLibNCCL.Limit+1)
	writeFile(t, filepath.Join(root, "usr/local/lib/libnccl.so.2.28.9"), "\x7fELF...NCCL version 2.27.3+cuda12.9\x00")
	if err := os.Symlink("libnccl.so.2.28.9", filepath.Join(root, "usr/local/lib/libnccl.so")); err != nil {
		t.Fatal(err)
	}
	o := &globalOptions{root: root}
	var v string
	var src string
	var others []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		ver, s, oth := o.findLibVersion("")
		v, src, others = ver.String(), s, oth
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the library search blocked")
	}
	if v != "2.27.3" || src != "/usr/local/lib/libnccl.so" {
		t.Errorf("found %s at %s, want 2.27.3 at /usr/local/lib/libnccl.so", v, src)
	}
	notes := strings.Join(others, "\n")
	for _, want := range []string{
		"left out /usr/lib/libnccl.so.2: hostfs: open /usr/lib/libnccl.so.2: not a regular file",
		"left out /usr/lib64/libnccl.so.2: hostfs: read /usr/lib64/libnccl.so.2: file larger than the read limit: 256 MiB (the limit for a libnccl.so)",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if len(others) != 2 {
		t.Errorf("%d notes, want 2 (the link and its target are one file):\n%s", len(others), notes)
	}
}

// TestPidJobFiles reproduces #21's defect 6: under --pid, as root, f0912a0 read
// the file the job's NCCL_CONF_FILE named as root: /dev/zero ran it out of memory,
// a FIFO hung it, and a root-only file's NCCL_* line was printed in --format json.
// The file is now read only if the job's own user could read it.
func TestPidJobFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process of another user")
	}
	dir, err := os.MkdirTemp("", "pidjob")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "root-only.conf")
	if err := os.WriteFile(secret, []byte("NCCL_ROOT_ONLY_SECRET=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.conf")
	mkfifo(t, fifo)
	for _, tt := range []struct{ file, want string }{
		{secret, "not read: process %d could not read it itself"},
		{"/dev/zero", "not a regular file"},
		{fifo, "not a regular file"},
	} {
		cmd := exec.Command("sleep", "60")
		cmd.Env = []string{"NCCL_CONF_FILE=" + tt.file, "NCCL_DEBUG=INFO"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if err := cmd.Start(); err != nil {
			t.Skipf("start a process as nobody: %v", err)
		}
		pid := cmd.Process.Pid
		code, stdout, stderr := finish(t, "--pid", strconv.Itoa(pid), "--quick", "--check", "nccl_env", "--format", "json")
		cmd.Process.Kill()
		cmd.Wait()
		if code == 2 || code == exitUsage || strings.Contains(stdout+stderr, "NCCL_ROOT_ONLY_SECRET") {
			t.Errorf("%s: exit %d; secret shown: %v\n%s", tt.file, code, strings.Contains(stdout, "NCCL_ROOT_ONLY_SECRET"), stdout)
		}
		want := strings.Replace(tt.want, "%d", strconv.Itoa(pid), 1)
		if !strings.Contains(stdout, want) {
			t.Errorf("%s: output lacks %q:\n%s", tt.file, want, stdout)
		}
	}
}

// TestNamedFIFOs reproduces #21's defects 9 and 11: f0912a0 hung on a FIFO named
// by --prometheus (the previous file was opened for its AER counts before the
// writer's refusal), --config, --pci-ids and fix --persist's drop-in path.
func TestNamedFIFOs(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	fifo := filepath.Join(t.TempDir(), "fifo")
	mkfifo(t, fifo)
	code, _, stderr := finish(t, "--root", root, "--quick", "--prometheus", fifo)
	if code != exitNoEval || !strings.Contains(stderr, "exists and is not a regular file (a named pipe)") {
		t.Errorf("--prometheus FIFO: exit %d, want 3:\n%s", code, stderr)
	}
	code, _, stderr = finish(t, "--root", root, "--quick", "--config", fifo)
	if code != exitUsage || !strings.Contains(stderr, "not a regular file") {
		t.Errorf("--config FIFO: exit %d, want 64:\n%s", code, stderr)
	}
	code, _, stderr = finish(t, "--root", root, "--pci-ids", fifo, "topo")
	if code != 0 || !strings.Contains(stderr, "not a regular file") {
		t.Errorf("--pci-ids FIFO: exit %d, want 0 and a warning:\n%s", code, stderr)
	}
	mkfifo(t, filepath.Join(root, provision.DropInPath))
	code, stdout, _ := finish(t, "--root", root, "--no-nvml", "fix", "--persist")
	if code == 0 || !strings.Contains(stdout, "exists and is not a regular file (a named pipe)") {
		t.Errorf("fix --persist onto a FIFO: exit %d:\n%s", code, stdout)
	}
}

// TestNamedNCCLConfFIFO reproduces #21's defect 11 for p2pcheck's own
// NCCL_CONF_FILE on the live machine.
func TestNamedNCCLConfFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	mkfifo(t, fifo)
	t.Setenv("NCCL_CONF_FILE", fifo)
	code, _, stderr := finish(t, "--quick", "--check", "nccl_env")
	if code == 2 || code == exitUsage || !strings.Contains(stderr, fifo+": not a regular file") {
		t.Errorf("exit %d, want a warning:\n%s", code, stderr)
	}
}

// TestTopoXMLLink reproduces #21's defect 10 at the command line: nccl --topo-xml
// through a link truncated the link's target.
func TestTopoXMLLink(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	dir := t.TempDir()
	victim := filepath.Join(dir, "passwd")
	writeFile(t, victim, "root:x:0:0::/root:/bin/sh\n")
	link := filepath.Join(dir, "topo.xml")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := finish(t, "--root", root, "--no-nvml", "nccl", "--topo-xml", link)
	if code != exitNoEval || !strings.Contains(stderr, "exists and is not a regular file (a symbolic link)") {
		t.Errorf("exit %d, want 3:\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "root:x:0:0::/root:/bin/sh\n" {
		t.Errorf("the link's target now holds %q", b)
	}
	out := filepath.Join(dir, "new.xml")
	if code, _, stderr := finish(t, "--root", root, "--no-nvml", "nccl", "--topo-xml", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), "<system") {
		t.Errorf("--topo-xml wrote %q, %v", b, err)
	}
}

// TestSnapshotCountsLeftOut reproduces #21's defect 12: snapshot -o of a --root
// tree left device nodes and FIFOs out but counted only one file left out.
func TestSnapshotCountsLeftOut(t *testing.T) {
	root := machineRoot(t, "degraded-link")
	fn := firstFunctionDir(t, root)
	mkfifo(t, filepath.Join(fn, "fifo_attr"))
	zeroNode(t, filepath.Join(fn, "zero_attr"))
	os.Remove(filepath.Join(root, "proc/cmdline"))
	mkfifo(t, filepath.Join(root, "proc/cmdline"))
	out := filepath.Join(t.TempDir(), "s.tar.gz")
	code, _, stderr := finish(t, "--root", root, "snapshot", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"fifo_attr: not a regular file", "zero_attr: not a regular file", "/proc/cmdline: not a regular file", " 3 files left out)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// firstFunctionDir returns the sysfs directory of the first PCI function of root.
func firstFunctionDir(t *testing.T, root string) string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, "sys/bus/pci/devices"))
	if err != nil || len(ents) == 0 {
		t.Fatalf("no PCI functions: %v", err)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", ents[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestIntervalFloor reproduces #21's defect 13: --interval=1ns was accepted and
// rewrote the fleet files about 250 times a second.
func TestIntervalFloor(t *testing.T) {
	for _, iv := range []string{"1ns", "9s", "-1s"} {
		code, _, stderr := p2pcheck("--interval", iv, "--quick")
		if code != exitUsage || !strings.Contains(stderr, "--interval must be at least 10s") {
			t.Errorf("--interval %s: exit %d, %q; want a usage error", iv, code, stderr)
		}
	}
}

// bidiOrZeroWidth matches the runes #21's defect 14 found reaching the terminal.
var bidiOrZeroWidth = regexp.MustCompile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u2060\ufeff]")

// TestTextEscapesBidi reproduces #21's defect 14: bidi and zero-width characters
// in kernel and driver versions, the driver, net and InfiniBand names and pci.ids
// names reached the terminal raw. Every text command now escapes them.
func TestTextEscapesBidi(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	edit := func(name, old, new string) {
		p := filepath.Join(root, name)
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), old) {
			t.Fatalf("%s: %v, or no %q in it", name, err, old)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("proc/version", "(builder@", "(build\u202eer@")
	edit("proc/driver/nvidia/version", "570.133.20", "570.133\u202e.20")
	// The mlx5 driver renamed, every driver link with it.
	drivers := filepath.Join(root, "sys/bus/pci/drivers")
	if err := os.Rename(filepath.Join(drivers, "mlx5_core"), filepath.Join(drivers, "mlx5\u200b_core")); err != nil {
		t.Fatal(err)
	}
	renameChildren := func(dirName, from, to string) {
		filepath.Walk(filepath.Join(root, "sys/devices"), func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return nil
			}
			switch {
			case fi.Mode()&os.ModeSymlink != 0 && fi.Name() == "driver":
				if target, _ := os.Readlink(p); strings.HasSuffix(target, "/mlx5_core") {
					os.Remove(p)
					os.Symlink(strings.TrimSuffix(target, "mlx5_core")+"mlx5\u200b_core", p)
				}
			case fi.IsDir() && fi.Name() == dirName:
				ents, _ := os.ReadDir(p)
				for _, e := range ents {
					os.Rename(filepath.Join(p, e.Name()), filepath.Join(p, strings.Replace(e.Name(), from, to, 1)))
				}
				return filepath.SkipDir
			}
			return nil
		})
	}
	renameChildren("net", "ibp", "ibp\u2066")
	renameChildren("infiniband", "mlx5_", "mlx5\u2069_")
	ids := filepath.Join(t.TempDir(), "pci.ids")
	writeFile(t, ids, "10de  NVIDIA\u202e Corporation\n\t2330  GH100 [H100\u200b SXM5 80GB]\n15b3  Mellanox\ufeff Technologies\nC 03  Display controller\n\t02  3D\u2060 controller\n")
	for _, args := range [][]string{
		{"report"}, {"topo"}, {"pairs"}, {"matrix"}, {"gdr"}, {"nccl"}, {"fix"},
	} {
		all := append([]string{"--root", root, "--no-nvml", "--pci-ids", ids}, args...)
		code, stdout, stderr := finish(t, all...)
		if code == exitUsage || code == 2 {
			t.Errorf("%s: exit %d: %s", args[0], code, stderr)
		}
		if m := bidiOrZeroWidth.FindString(stdout + stderr); m != "" {
			i := strings.Index(stdout+stderr, m)
			t.Errorf("%s: %U reached the terminal raw: %q", args[0], []rune(m)[0], (stdout + stderr)[max(0, i-60):min(len(stdout+stderr), i+20)])
		}
	}
}
