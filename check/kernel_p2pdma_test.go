package check_test

import (
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/procfs"
)

func TestKernelP2PDMARules(t *testing.T) {
	r := run1(t, check.NewFacts(loadMachine(t, "amd-epyc"), check.Inputs{}), "kernel_p2pdma")
	judge(t, verdict{check.Pass, nil, "built with CONFIG_PCI_P2PDMA", ""}, r)
	n := loadMachine(t, "amd-epyc")
	n.Platform.KernelConfig = procfs.KernelConfig{Source: "/boot/config-6.1.0-28-amd64", Options: map[string]string{"CONFIG_PCI_P2PDMA": "n"}}
	judge(t, verdict{check.Fail, nvmeP2P, "without CONFIG_PCI_P2PDMA", "Debian's 6.1 and 6.12 do not"}, run1(t, check.NewFacts(n, check.Inputs{}), "kernel_p2pdma"))
	n.Platform.KernelConfig = procfs.KernelConfig{}
	judge(t, verdict{check.Unknown, nvmeP2P, "kernel configuration not found", ""}, run1(t, check.NewFacts(n, check.Inputs{}), "kernel_p2pdma"))
}
