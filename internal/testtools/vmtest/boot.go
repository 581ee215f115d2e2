package vmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Kernel is a guest kernel the tier boots.
type Kernel struct {
	Name string // short name used in run names and testdata paths: "debian", "oracle"
	Path string // bzImage / vmlinuz
	// Oracle marks the P2PDMA test kernel: it gets the p2poracle parameter and its
	// verdicts are compared with p2pcheck's.
	Oracle bool
	// PFStub is the kernel's pci-pf-stub.ko, loaded in guests that enable VFs when
	// the kernel has no built-in driver for the PF (Debian builds nvme as a module).
	// Empty when the PF's driver is built in (the test kernel).
	PFStub string
}

// Kernel names.
const (
	KernelDebian = "debian"
	KernelOracle = "oracle"
)

// OracleKernelPath is where the P2PDMA test kernel lives relative to the module root
// (../shared/kernel/ beside the checkout; see its README).
func OracleKernelPath(moduleRoot string) string {
	return filepath.Join(moduleRoot, "..", "shared", "kernel", "bzImage-6.12-p2poracle")
}

// DebianKernelPath is where scripts/fetch-kernel.sh leaves Debian's stock kernel
// inside cacheDir (the link debian-kernel/vmlinuz points at the versioned file).
func DebianKernelPath(cacheDir string) string {
	return filepath.Join(cacheDir, "debian-kernel", "vmlinuz")
}

// DebianPFStubPath is the pci-pf-stub module scripts/fetch-kernel.sh unpacks next to
// the kernel.
func DebianPFStubPath(cacheDir string) string {
	return filepath.Join(cacheDir, "debian-kernel", "pci-pf-stub.ko")
}

// Binaries are the guest programs built from this checkout, each with the reason it
// could not be built (the package is missing or broken). A missing binary is not a
// reason to skip: the checks that need it fail.
type Binaries struct {
	P2PCheck    string // static p2pcheck
	P2PCheckErr error
	P2PMemTest  string // static test binary of package p2pmem
	P2PMemErr   error
}

// Build compiles the guest binaries of the module at moduleRoot into dir with
// CGO_ENABLED=0, so they run on the busybox initramfs without a libc.
func Build(ctx context.Context, goTool, moduleRoot, dir string) Binaries {
	run := func(out string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, goTool, args...)
		cmd.Dir = moduleRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("vmtest: %s %v: %w\n%s", goTool, args, err, bytes.TrimSpace(b))
		}
		return out, nil
	}
	var b Binaries
	p := filepath.Join(dir, "p2pcheck")
	b.P2PCheck, b.P2PCheckErr = run(p, "build", "-trimpath", "-o", p, "./cmd/p2pcheck")
	m := filepath.Join(dir, "p2pmem.test")
	b.P2PMemTest, b.P2PMemErr = run(m, "test", "-c", "-trimpath", "-o", m, "./p2pmem")
	return b
}

// Boot is one run of a topology on a kernel.
type Boot struct {
	Topology *Topology
	Kernel   Kernel
	Busybox  string // a static busybox
	QEMU     string // qemu-system-x86_64
	Bin      Binaries
	// Captures are taken after the standard ones (uname, dmesg, pci.txt).
	Captures []Capture
	MemMiB   int
	SMP      int
	Timeout  time.Duration
	// WorkDir holds the initramfs and drive images; the caller removes it.
	WorkDir string
	// Extra are more files for the initramfs: guest path (relative, e.g.
	// "bin/lspci") to host path.
	Extra map[string]string
}

// Result is what one boot produced.
type Result struct {
	Console  Console
	Raw      []byte        // the whole serial console
	Cmdline  []string      // the QEMU command line, for reproducing by hand
	Duration time.Duration // QEMU's wall time
}

// driveSize is the size of each sparse NVMe drive image.
const driveSize = 64 << 20

// Run builds the initramfs, creates the drives, boots the guest and parses its
// console. The console is returned even when parsing fails, for the log.
func (b Boot) Run(ctx context.Context) (Result, error) {
	var res Result
	bb, err := os.ReadFile(b.Busybox)
	if err != nil {
		return res, fmt.Errorf("vmtest: busybox: %w", err)
	}
	files := []File{
		{Name: "bin/busybox", Mode: 0o755, Data: bb},
		{Name: "proc", Mode: fs.ModeDir | 0o755},
		{Name: "sys", Mode: fs.ModeDir | 0o755},
		{Name: "dev", Mode: fs.ModeDir | 0o755},
		{Name: "tmp", Mode: fs.ModeDir | 0o777},
	}
	extra := map[string]string{"bin/p2pcheck": b.Bin.P2PCheck, "bin/p2pmem.test": b.Bin.P2PMemTest}
	if b.Topology.hasVFs() {
		extra[pfStubGuestPath[1:]] = b.Kernel.PFStub
	}
	maps.Copy(extra, b.Extra)
	for name, path := range extra {
		if path == "" {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return res, fmt.Errorf("vmtest: %w", err)
		}
		files = append(files, File{Name: name, Mode: 0o755, Data: data})
	}
	captures := append([]Capture{CaptureRelease, CaptureDmesg, CapturePCI}, b.Captures...)
	files = append(files, File{Name: "init", Mode: 0o755, Data: []byte(InitScript(b.Topology.Setup(b.Kernel), captures))})
	var initrd bytes.Buffer
	if err := WriteInitramfs(&initrd, files); err != nil {
		return res, err
	}
	initrdPath := filepath.Join(b.WorkDir, "initrd.gz")
	if err := os.WriteFile(initrdPath, initrd.Bytes(), 0o644); err != nil {
		return res, fmt.Errorf("vmtest: %w", err)
	}
	for _, d := range b.Topology.Drives() {
		if err := createSparse(filepath.Join(b.WorkDir, d), driveSize); err != nil {
			return res, err
		}
	}
	m := Machine{
		QEMU:    b.QEMU,
		Kernel:  b.Kernel.Path,
		Initrd:  initrdPath,
		Cmdline: b.Topology.Cmdline(b.Kernel),
		Args:    b.Topology.QEMUArgs(b.WorkDir, b.MemMiB, b.SMP),
		Timeout: b.Timeout,
	}
	res.Cmdline = m.CommandLine()
	start := time.Now()
	res.Raw, err = m.Run(ctx)
	res.Duration = time.Since(start)
	if err != nil {
		return res, err
	}
	if res.Console, err = ParseConsole(res.Raw); err != nil {
		return res, err
	}
	if !res.Console.Done {
		return res, errors.New("vmtest: guest powered off before its final marker")
	}
	return res, nil
}

// Cmdline is the kernel command line for t on k: the serial console, panic ends the
// boot (with -no-reboot), the oracle's parameter on the test kernel, intel_iommu=on
// with a vIOMMU, and the entry's own parameters.
//
// With a vIOMMU it also passes no_timer_check: TCG on a loaded host can miss the
// kernel's early test that the timer interrupt arrives, and with interrupt remapping
// a missed test is a panic ("timer doesn't work through Interrupt-remapped IO-APIC",
// check_timer in arch/x86/kernel/apic/io_apic.c), which would make the tier depend
// on the machine's speed.
func (t *Topology) Cmdline(k Kernel) []string {
	c := []string{"console=ttyS0", "quiet", "panic=-1", "rdinit=/init"}
	if k.Oracle {
		c = append(c, "p2poracle")
	}
	if t.IOMMU {
		c = append(c, "intel_iommu=on", "no_timer_check")
	}
	return append(c, t.Append...)
}

func createSparse(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("vmtest: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("vmtest: %w", err)
	}
	return nil
}
