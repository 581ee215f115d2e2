package vmtest

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel kill QEMU when the test process dies (go test's
// -timeout, an interrupt), so that no guest outlives the tier.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
