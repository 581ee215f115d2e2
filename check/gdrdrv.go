package check

import (
	"fmt"
	"io/fs"

	"github.com/p2pkit/p2pkit/internal/gdrready"
	"github.com/p2pkit/p2pkit/node"
)

// gdrFacts turns the platform facts into gdrdrv readiness facts.
func (f *Facts) gdrFacts() gdrready.Facts {
	p := f.Node.Platform
	var g gdrready.Facts
	if p.Modules != nil {
		loaded := p.Modules.Loaded("gdrdrv")
		g.Module = &loaded
	}
	if p.CharDevices != nil {
		g.DevicesRead = true
		if major, ok := p.CharMajor("gdrdrv"); ok {
			g.Major = &major
		}
	}
	if n := p.GDRDrvNode; n != nil {
		g.Node = &gdrready.Node{Mode: n.Mode, Major: n.Major, Minor: n.Minor, NumberKnown: n.NumberKnown}
	}
	g.Params = p.GDRDrvParams
	if d := p.NVIDIA; d != nil {
		g.Driver = &gdrready.Driver{Version: d.Version, Major: d.Major, Open: d.Open}
	}
	if a := f.GDRDrvAccess; a != nil {
		g.Access = &gdrready.Access{UID: a.UID, ReadWrite: a.ReadWrite}
	}
	g.Arm64 = f.Arm64()
	g.IntelTDXGuest = p.CPU != nil && p.CPU.HasFlag("tdx_guest")
	return g
}

// checkGdrdrv checks the GDRCopy kernel module end to end with the rules of
// package gdrready (loaded, major registered, /dev/gdrdrv a character device
// with that major and minor 0, usable by the running user, build flavour against
// the loaded driver). A gdrdrv that is missing or broken blocks gdrcopy only:
// NCCL uses GDRCopy only on request (NCCL_GDRCOPY_ENABLE), and GDRCopy 2.6 can
// do without gdrdrv through DMA-BUF.
func checkGdrdrv(f *Facts) Result {
	r := Result{Refs: []string{docRef("gdrdrv"), urlGDRCopy, "NVIDIA/gdrcopy src/gdrdrv/gdrdrv.c", "NVIDIA/gdrcopy packages/gdrcopy.spec, packages/dkms/debian"}}
	p := f.Node.Platform
	if len(f.NVIDIAGPUs()) == 0 {
		r.Status, r.Summary = Skip, "no NVIDIA GPU"
		return r
	}
	g := f.gdrFacts()
	major, hasMajor := p.CharMajor("gdrdrv")
	r.Evidence = append(r.Evidence,
		Evidence{Source: "/proc/modules", Value: presence(p.Modules != nil, p.Modules.Loaded("gdrdrv"), "gdrdrv")},
		Evidence{Source: "/proc/devices", Value: presence(p.CharDevices != nil, hasMajor, fmt.Sprintf("%d gdrdrv", major))},
		Evidence{Source: "/dev/gdrdrv", Value: nodeString(p.GDRDrvNode)},
	)
	v := gdrready.Judge(g)
	if v.Version != "" {
		r.Evidence = append(r.Evidence, Evidence{Source: "/proc/driver/gdrdrv/params", Value: "Version: " + v.Version + "; flavor: " + v.Flavour})
	}
	if a := g.Access; a != nil {
		r.Evidence = append(r.Evidence, Evidence{Source: "access(/dev/gdrdrv, R_OK|W_OK)", Value: fmt.Sprintf("uid %d: %t", a.UID, a.ReadWrite)})
	}
	r.Expected = "gdrdrv loaded, /dev/gdrdrv c <major> 0 usable by the job's users"
	if !v.Known {
		r.Status, r.Blocks = Unknown, []Capability{CapGDRCopy}
		r.Summary = "/proc/modules and /proc/devices unreadable and no /dev/gdrdrv: gdrdrv's state is unknown"
		return r
	}
	r.Observed = "gdrdrv not loaded"
	if p.Modules.Loaded("gdrdrv") || hasMajor {
		r.Observed = "gdrdrv loaded, /dev/gdrdrv " + nodeString(p.GDRDrvNode)
		if v.Version != "" {
			r.Observed += ", version " + v.Version + ", flavour " + v.Flavour
		}
	}
	for _, pr := range v.Problems {
		s := map[gdrready.Severity]Status{gdrready.Blocking: Fail, gdrready.Degraded: Warn, gdrready.Info: Pass}[pr.Severity]
		r.Findings = append(r.Findings, Finding{Subject: "gdrdrv", Status: s, Message: pr.What})
	}
	if first := v.First(); first != nil {
		r.Summary, r.Remediation = first.What, first.Fix
		r.Status = Warn
		if first.Severity == gdrready.Blocking {
			r.Status, r.Blocks = Fail, []Capability{CapGDRCopy}
		}
		return r
	}
	r.Status = Pass
	r.Summary = "gdrdrv ready"
	if v.Version != "" {
		r.Summary += " (" + v.Version + ", " + v.Flavour + ")"
	}
	for _, pr := range v.Problems {
		r.Summary += "; " + pr.What
	}
	return r
}

func presence(known, present bool, what string) string {
	switch {
	case !known:
		return "unreadable"
	case present:
		return what
	}
	return "no gdrdrv"
}

// nodeString describes a device node as ls -l does: "crw-rw-rw- 235:0".
func nodeString(n *node.DevNode) string {
	if n == nil {
		return "absent"
	}
	s := n.Mode.String()
	if n.Mode&fs.ModeCharDevice != 0 {
		s = "c" + n.Mode.Perm().String()[1:]
	}
	if n.NumberKnown {
		s += fmt.Sprintf(" %d:%d", n.Major, n.Minor)
	}
	return s
}
