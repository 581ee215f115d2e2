package check_test

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/procfs"
)

func TestGdrdrvRules(t *testing.T) {
	loaded := []procfs.Module{{Name: "nvidia"}, {Name: "gdrdrv"}}
	devs := []procfs.CharDevice{{Major: 195, Name: "nvidia"}, {Major: 235, Name: "gdrdrv"}}
	params := func(flavour string) map[string]string {
		return map[string]string{"Version": "2.5", "Built for NVIDIA driver flavor": flavour}
	}
	for _, tt := range []struct {
		name   string
		change func(p *node.Platform)
		want   verdict
	}{
		{"ready", func(p *node.Platform) {}, verdict{check.Pass, nil, "gdrdrv ready (2.5, opensource)", ""}},
		// A missing gdrdrv blocks GDRCopy only; the fix names each packaging's service.
		{"not loaded", func(p *node.Platform) {
			p.Modules, p.CharDevices, p.GDRDrvNode, p.GDRDrvParams = p.Modules[:1], p.CharDevices[:1], nil, nil
		},
			verdict{check.Fail, gdrcopy, "gdrdrv kernel module is not loaded", "sudo systemctl start gdrdrv (Debian/Ubuntu gdrdrv-dkms), sudo systemctl start gdrcopy (RHEL RPM)"}},
		{"no node", func(p *node.Platform) { p.GDRDrvNode = nil },
			verdict{check.Fail, gdrcopy, "/dev/gdrdrv does not exist", "mknod -m 666 /dev/gdrdrv c 235 0"}},
		{"stale major", func(p *node.Platform) { p.GDRDrvNode = charDev(240, 0o666) },
			verdict{check.Fail, gdrcopy, "stale node", "mknod -m 666 /dev/gdrdrv c 235 0"}},
		{"minor 1", func(p *node.Platform) { n := charDev(235, 0o666); n.Minor = 1; p.GDRDrvNode = n },
			verdict{check.Fail, gdrcopy, "gdrdrv serves minor 0 only", "mknod -m 666 /dev/gdrdrv c 235 0"}},
		{"regular file", func(p *node.Platform) { p.GDRDrvNode = &procfs.DevNode{Mode: 0o666} },
			verdict{check.Fail, gdrcopy, "not a character device", "mknod"}},
		{"SUSE mode", func(p *node.Platform) { p.GDRDrvNode = charDev(235, 0o660) },
			verdict{check.Warn, nil, "mode 0660", "group video"}},
		// GDRCopy's README: a proprietary-flavour gdrdrv works with the open driver.
		{"proprietary flavour, open driver", func(p *node.Platform) { p.GDRDrvParams = params("proprietary") },
			verdict{check.Pass, nil, "works with either", ""}},
		{"proprietary flavour, TDX guest", func(p *node.Platform) {
			p.GDRDrvParams = params("proprietary")
			cpu := *p.CPU
			cpu.Flags = append(slices.Clone(cpu.Flags), "tdx_guest")
			p.CPU = &cpu
		}, verdict{check.Fail, gdrcopy, "Intel TDX guest", "rebuild gdrdrv"}},
		{"open flavour, proprietary driver", func(p *node.Platform) { p.NVIDIA = &procfs.NVIDIADriver{Version: "570.133.20", Major: 570} },
			verdict{check.Warn, nil, "cannot load with it", "rebuild gdrdrv"}},
		{"no params", func(p *node.Platform) { p.GDRDrvParams = nil }, verdict{check.Pass, nil, "older than GDRCopy 2.5", ""}},
		{"unreadable", func(p *node.Platform) { p.Modules, p.CharDevices, p.GDRDrvNode, p.GDRDrvParams = nil, nil, nil, nil },
			verdict{check.Unknown, gdrcopy, "state is unknown", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := loadMachine(t, "degraded-link")
			n.Platform.Modules, n.Platform.CharDevices = loaded, devs
			n.Platform.GDRDrvNode, n.Platform.GDRDrvParams = charDev(235, 0o666), params("opensource")
			tt.change(&n.Platform)
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{}), "gdrdrv"))
		})
	}
	for _, tt := range []struct {
		name   string
		access check.Access
		perm   fs.FileMode
		want   verdict
	}{
		{"user denied", check.Access{UID: 1000}, 0o660, verdict{check.Warn, nil, "the running user (uid 1000) cannot open it", "chmod 666"}},
		{"user allowed by group", check.Access{UID: 1000, ReadWrite: true}, 0o660, verdict{check.Warn, nil, "only its owner and group", "chmod 666"}},
		{"user allowed", check.Access{UID: 1000, ReadWrite: true}, 0o666, verdict{check.Pass, nil, "gdrdrv ready", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := loadMachine(t, "degraded-link")
			n.Platform.Modules, n.Platform.CharDevices = loaded, devs
			n.Platform.GDRDrvNode, n.Platform.GDRDrvParams = charDev(235, tt.perm), params("opensource")
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{Source: check.Live, GDRDrvAccess: &tt.access}), "gdrdrv"))
		})
	}
	t.Run("no NVIDIA GPU", func(t *testing.T) {
		judge(t, verdict{check.Skip, nil, "no NVIDIA GPU", ""}, run1(t, check.NewFacts(loadMachine(t, "sriov-nic"), check.Inputs{}), "gdrdrv"))
	})
}

// TestH200GdrdrvBlocksGDRCopy: on the H200 capture a missing gdrdrv blocks gdrcopy
// only, so with the default requirements (p2p, gdr) it warns instead of failing.
func TestH200GdrdrvBlocksGDRCopy(t *testing.T) {
	r := result(t, report(t, "h200-2gpu-vm"), "gdrdrv")
	judge(t, verdict{check.Warn, gdrcopy, "gdrdrv kernel module is not loaded", "systemctl start gdrdrv"}, r)
	if !slices.ContainsFunc(r.Remediation, func(s string) bool { return strings.Contains(s, "gdrcopy.enabled=true") }) {
		t.Errorf("remediation lacks the GPU Operator's Helm value: %q", r.Remediation)
	}
}
