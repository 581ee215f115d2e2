package check_test

import (
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/procfs"
)

func TestNVIDIARegistry(t *testing.T) {
	for _, tt := range []struct {
		name   string
		params *procfs.NVIDIAParams
		want   verdict
	}{
		{"nothing set", params(map[string]string{"RegistryDwords": "", "DmaRemapPeerMmio": "1"}), verdict{check.Pass, nil, "no registry override", ""}},
		{"other keys", params(map[string]string{"RegistryDwords": "RMUseSwI2c=0x01;RmForceDisableIomapWC=1"}), verdict{check.Pass, nil, "no registry override", ""}},
		{"force PCIe", params(map[string]string{"RegistryDwords": "RMForceP2PType=1"}), verdict{check.Warn, nil, "RMForceP2PType", "NVreg_RegistryDwords"}},
		{"force type 0 is the default", params(map[string]string{"RegistryDwords": "RMForceP2PType=0"}), verdict{check.Pass, nil, "no registry override", ""}},
		{"undefined type", params(map[string]string{"RegistryDwords": "RMForceP2PType=7"}), verdict{check.Warn, nil, "RMForceP2PType", "NVreg_RegistryDwords"}},
		// Reads and writes disallowed (0), atomics left to the chipset (2): DR.
		{"ForceP2P disallows", params(map[string]string{"RegistryDwords": "ForceP2P=0x200"}), verdict{check.Fail, p2p, "disallows P2P", "NVreg_RegistryDwords"}},
		{"ForceP2P allows", params(map[string]string{"RegistryDwords": "ForceP2P=0x111"}), verdict{check.Warn, nil, "ForceP2P", "NVreg_RegistryDwords"}},
		{"ForceP2P default", params(map[string]string{"RegistryDwords": "ForceP2P=0x222"}), verdict{check.Pass, nil, "no registry override", ""}},
		{"ForceP2P not a number", params(map[string]string{"RegistryDwords": "ForceP2P=on"}), verdict{check.Warn, nil, "ForceP2P", "NVreg_RegistryDwords"}},
		{"no peer MMIO remap", params(map[string]string{"DmaRemapPeerMmio": "0"}), verdict{check.Warn, nil, "DmaRemapPeerMmio", "NVreg_RegistryDwords"}},
		{"per device", params(map[string]string{"RegistryDwordsPerDevice": "pci=0000:03:00.0;RMForceP2PType=2"}), verdict{check.Warn, nil, "RegistryDwordsPerDevice", "NVreg_RegistryDwords"}},
		{"params unread", nil, verdict{check.Unknown, p2p, "was not read", "cat /proc/driver/nvidia/params"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := loadMachine(t, "dgx-h100")
			n.Platform.NVIDIAParams = tt.params
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{}), "nvidia_registry"))
		})
	}
	n := loadMachine(t, "dgx-h100")
	n.Platform.NVIDIA, n.Platform.NVIDIAParams = nil, nil
	judge(t, verdict{check.Skip, nil, "not loaded", ""}, run1(t, check.NewFacts(n, check.Inputs{}), "nvidia_registry"))
}
