package vmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Machine is one guest boot: a kernel and initramfs on a QEMU q35 machine whose
// only console is the first serial port, connected to QEMU's stdout.
type Machine struct {
	QEMU    string   // qemu-system-x86_64 binary
	Kernel  string   // bzImage / vmlinuz
	Initrd  string   // gzip'd newc cpio
	Cmdline []string // kernel command line
	Args    []string // machine and devices (Topology.QEMUArgs)
	// Timeout bounds the whole boot; QEMU is killed when it expires.
	Timeout time.Duration
}

// maxConsole caps what is kept of the serial console; a guest that loops printing
// must not exhaust the host's memory.
const maxConsole = 64 << 20

// ErrTimeout is returned (wrapped) when the guest did not power off in time.
var ErrTimeout = errors.New("vmtest: guest did not power off in time")

// CommandLine returns the full QEMU argument list, for logs and for reproducing a
// boot by hand.
func (m Machine) CommandLine() []string {
	args := []string{m.QEMU,
		"-nodefaults", "-no-reboot", "-display", "none", "-vga", "none",
		"-serial", "stdio", "-monitor", "none",
		"-kernel", m.Kernel, "-initrd", m.Initrd, "-append", strings.Join(m.Cmdline, " ")}
	return append(args, m.Args...)
}

// Run boots the machine and returns what it printed on the console. The guest is
// expected to power itself off (poweroff -f); -no-reboot makes a panic or reboot end
// QEMU too, and the host kills QEMU at the timeout, when ctx ends, or (Linux) when
// the calling process dies. QEMU's own diagnostics (stderr)
// are returned in the error when it exits non-zero.
func (m Machine) Run(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	argv := m.CommandLine()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxConsole, 1<<20
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	killWithParent(cmd)
	err := cmd.Run()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return stdout.Bytes(), fmt.Errorf("%w (%v)", ErrTimeout, m.Timeout)
	case err != nil:
		return stdout.Bytes(), fmt.Errorf("vmtest: qemu: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// limitedBuffer keeps the first max bytes written and drops the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
