package gdrready

import (
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func charDev(major, minor uint32, perm fs.FileMode) *Node {
	return &Node{Mode: fs.ModeDevice | fs.ModeCharDevice | perm, Major: major, Minor: minor, NumberKnown: true}
}

// ready is a working gdrdrv 2.5 built for the open driver, with the open driver.
func ready() Facts {
	return Facts{
		Module: ptr(true), DevicesRead: true, Major: ptr(uint32(235)),
		Node:   charDev(235, 0, 0o666),
		Params: map[string]string{ParamVersion: "2.5", ParamFlavour: "opensource"},
		Driver: &Driver{Version: "570.133.20", Major: 570, Open: true},
	}
}

// summary is what the table compares: readiness and each problem's severity and
// the start of its text.
type summary struct {
	Known, Ready bool
	Problems     []string // "severity: what"
	Fix          string   // the first fix of the first problem to act on
}

func summarize(v Verdict) summary {
	s := summary{Known: v.Known, Ready: v.Ready}
	for _, p := range v.Problems {
		s.Problems = append(s.Problems, string(p.Severity)+": "+p.What)
	}
	if p := v.First(); p != nil && len(p.Fix) > 0 {
		s.Fix = p.Fix[0]
	}
	return s
}

func TestJudge(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*Facts)
		want   summary
	}{
		{"ready", func(*Facts) {}, summary{Known: true, Ready: true}},
		{"nothing known", func(f *Facts) { *f = Facts{} }, summary{}},
		{"not loaded, no node", func(f *Facts) { f.Module, f.Major, f.Node, f.Params = ptr(false), nil, nil, nil },
			summary{Known: true, Problems: []string{"blocking: the gdrdrv kernel module is not loaded (not in /proc/modules)", "blocking: /dev/gdrdrv does not exist"}, Fix: FixLoad}},
		{"not loaded, stale node", func(f *Facts) { f.Module, f.Major, f.Params = ptr(false), nil, nil },
			summary{Known: true, Problems: []string{"blocking: the gdrdrv kernel module is not loaded (not in /proc/modules)", "blocking: a stale /dev/gdrdrv exists: no loaded driver answers for its major"}, Fix: FixLoad}},
		{"modules unreadable, no major", func(f *Facts) { f.Module, f.Major, f.Node, f.Params = nil, nil, nil, nil },
			summary{Known: true, Problems: []string{"blocking: the gdrdrv kernel module is not loaded (no gdrdrv in /proc/devices)", "blocking: /dev/gdrdrv does not exist"}, Fix: FixLoad}},
		{"loaded without major", func(f *Facts) { f.Major = nil },
			summary{Known: true, Problems: []string{"blocking: gdrdrv is loaded but registered no character device in /proc/devices"}, Fix: FixNoMajor}},
		{"modprobe without the node", func(f *Facts) { f.Node = nil },
			summary{Known: true, Problems: []string{"blocking: gdrdrv is loaded (major 235) but /dev/gdrdrv does not exist"}, Fix: "sudo mknod -m 666 /dev/gdrdrv c 235 0"}},
		{"plain file", func(f *Facts) { f.Node = &Node{Mode: 0o644} },
			summary{Known: true, Problems: []string{"blocking: /dev/gdrdrv is not a character device (mode -rw-r--r--)"}, Fix: "sudo rm /dev/gdrdrv && sudo mknod -m 666 /dev/gdrdrv c 235 0"}},
		{"stale major", func(f *Facts) { f.Node = charDev(240, 0, 0o666) },
			summary{Known: true, Problems: []string{"blocking: /dev/gdrdrv has major 240 but gdrdrv registered major 235 (a stale node)"}, Fix: "sudo rm /dev/gdrdrv && sudo mknod -m 666 /dev/gdrdrv c 235 0"}},
		{"minor 1", func(f *Facts) { f.Node = charDev(235, 1, 0o666) },
			summary{Known: true, Problems: []string{"blocking: /dev/gdrdrv has minor 1; gdrdrv serves minor 0 only"}, Fix: "sudo rm /dev/gdrdrv && sudo mknod -m 666 /dev/gdrdrv c 235 0"}},
		{"SUSE mode", func(f *Facts) { f.Node = charDev(235, 0, 0o660) },
			summary{Known: true, Ready: true, Problems: []string{"degraded: /dev/gdrdrv mode 0660: only its owner and group can use GDRCopy"}, Fix: FixPermission}},
		{"user denied", func(f *Facts) { f.Access = &Access{UID: 1000} },
			summary{Known: true, Ready: true, Problems: []string{"degraded: /dev/gdrdrv mode 0666: the running user (uid 1000) cannot open it read-write"}, Fix: FixPermission}},
		{"user allowed by group", func(f *Facts) { f.Node, f.Access = charDev(235, 0, 0o660), &Access{UID: 1000, ReadWrite: true} },
			summary{Known: true, Ready: true, Problems: []string{"degraded: /dev/gdrdrv mode 0660: only its owner and group can use GDRCopy"}, Fix: FixPermission}},
		{"before 2.5", func(f *Facts) { f.Params = nil },
			summary{Known: true, Ready: true, Problems: []string{"info: no /proc/driver/gdrdrv/params: gdrdrv older than GDRCopy 2.5, version and flavour unknown"}}},
		{"proprietary gdrdrv, open driver", func(f *Facts) { f.Params[ParamFlavour] = "proprietary" },
			summary{Known: true, Ready: true, Problems: []string{"info: gdrdrv was built for the proprietary NVIDIA driver and runs with the open one: " +
				"the GDRCopy README says it works with either (slower only on coherent platforms, broken only on Intel CPUs with confidential computing on)"}}},
		{"proprietary gdrdrv on Grace", func(f *Facts) { f.Params[ParamFlavour], f.Arm64 = "proprietary", true },
			summary{Known: true, Ready: true, Problems: []string{"degraded: gdrdrv was built for the proprietary NVIDIA driver and runs with the open one: " +
				"it works, but the GDRCopy README says it is slower on coherent platforms such as Grace Hopper"}, Fix: "rebuild gdrdrv against the source of the loaded driver (the gdrdrv-dkms and gdrcopy-kmod packages build against /usr/src/nvidia-<version>) and load it again"}},
		{"proprietary gdrdrv in a TDX guest", func(f *Facts) { f.Params[ParamFlavour], f.IntelTDXGuest = "proprietary", true },
			summary{Known: true, Problems: []string{"blocking: gdrdrv was built for the proprietary NVIDIA driver and this is an Intel TDX guest: " +
				"the GDRCopy README says that gdrdrv does not work on Intel CPUs with confidential computing on"}, Fix: "rebuild gdrdrv against the source of the loaded driver (the gdrdrv-dkms and gdrcopy-kmod packages build against /usr/src/nvidia-<version>) and load it again"}},
		{"open gdrdrv, proprietary driver", func(f *Facts) { f.Driver.Open = false },
			summary{Known: true, Ready: true, Problems: []string{"degraded: gdrdrv was built for the open NVIDIA driver but the proprietary one is loaded: " +
				"the GDRCopy README says such a gdrdrv cannot load with it (was the driver changed after gdrdrv loaded?)"}, Fix: "rebuild gdrdrv against the source of the loaded driver (the gdrdrv-dkms and gdrcopy-kmod packages build against /usr/src/nvidia-<version>) and load it again"}},
		{"open failed anyway", func(f *Facts) { f.OpenErr = "open /dev/gdrdrv: no such device" },
			summary{Known: true, Problems: []string{"blocking: opening /dev/gdrdrv failed: open /dev/gdrdrv: no such device"},
				Fix: "check that /dev/gdrdrv belongs to gdrdrv and that gdrdrv was built for the loaded NVIDIA driver (dmesg)"}},
		{"node uninspectable", func(f *Facts) { f.Node, f.NodeErr = nil, "permission denied" },
			summary{Known: true, Problems: []string{"blocking: cannot inspect /dev/gdrdrv: permission denied"}, Fix: "check the permissions of /dev"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := ready()
			tt.change(&f)
			if diff := cmp.Diff(tt.want, summarize(Judge(f))); diff != "" {
				t.Errorf("Judge (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadFixes: the DMA-BUF way round is offered only where the driver could
// export DMA-BUF.
func TestLoadFixes(t *testing.T) {
	for _, tt := range []struct {
		name   string
		driver *Driver
		want   []string
	}{
		{"open", &Driver{Major: 570, Open: true}, []string{FixLoad, FixOperator, FixDMABuf}},
		{"unknown driver", nil, []string{FixLoad, FixOperator, FixDMABuf}},
		{"proprietary", &Driver{Major: 570}, []string{FixLoad, FixOperator, FixNoDMABuf}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := Judge(Facts{Module: ptr(false), DevicesRead: true, Driver: tt.driver})
			if diff := cmp.Diff(tt.want, v.First().Fix); diff != "" {
				t.Errorf("fixes (-want +got):\n%s", diff)
			}
		})
	}
}
