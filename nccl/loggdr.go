package nccl

import (
	"fmt"
	"strconv"
	"strings"
)

// gdrLines explains each GPU Direct RDMA line and compares it with the
// prediction of its host.
func (x *explainer) gdrLines(r *LogReport) []LogGDR {
	out := []LogGDR{}
	for _, d := range x.l.GDR {
		var e LogGDR
		if d.GPU < 0 {
			e = x.nicGDR(d)
		} else {
			e = x.gpuGDR(d)
		}
		if e.Agrees == "no" {
			r.Disagree = append(r.Disagree, Disagreement{What: "GPU Direct RDMA line", NCCL: d.Text, Predicted: e.Predicted,
				Explanation: "not explained by a rule p2pcheck knows: a defect of the prediction, or a fact of the machine not in its input"})
		}
		out = append(out, e)
	}
	return out
}

// nicGDR explains "NET/<plugin> : GPU Direct RDMA Enabled|Disabled for HCA n
// 'name'": the plugin's pointer support (ncclTopoPopulateNics: NCCL_PTR_CUDA, or
// NCCL_PTR_DMABUF with DMA-BUF usable).
func (x *explainer) nicGDR(d GDRLine) LogGDR {
	e := LogGDR{Line: d.Text, Host: d.Host, Agrees: "not compared", Changes: []Change{}}
	rules := []string{rulePopulateNics}
	switch {
	case d.Plugin == "Socket":
		e.Why = "the Socket transport moves data through host memory only: it reports NCCL_PTR_HOST alone"
		rules = append(rules, ruleSocketPtr)
		if !d.Enabled {
			e.Why += "; no NCCL setting changes this: GPUDirect RDMA needs an RDMA NIC (InfiniBand or RoCE, NCCL's IB transport)"
		}
	case strings.HasPrefix(d.Plugin, "IB") && d.Enabled:
		e.Why = "the IB transport can register GPU memory: nvidia-peermem is loaded (NCCL_PTR_CUDA) or DMA-BUF works (NCCL_PTR_DMABUF)"
		rules = append(rules, ruleIBPtr)
	case strings.HasPrefix(d.Plugin, "IB"):
		e.Why = "the IB transport cannot register GPU memory: nvidia-peermem is not loaded and DMA-BUF is unusable (it needs the open NVIDIA kernel modules on Linux 5.12 or later, and NCCL_DMABUF_ENABLE not 0)"
		rules = append(rules, ruleIBPtr)
		e.Changes = append(e.Changes, Change{"load nvidia-peermem, or use DMA-BUF", "GPU Direct RDMA Enabled for the HCA"})
		if x.l.Settings["NCCL_DMABUF_ENABLE"] == "0" {
			e.Changes = append(e.Changes, Change{"unset NCCL_DMABUF_ENABLE", "DMA-BUF, where the kernel modules allow it"})
		}
	default:
		e.Why = "the " + d.Plugin + " plugin reports whether it can use GPU memory; p2pcheck does not model external plugins"
	}
	e.Rules = cites(rules, x.v)
	for _, p := range x.preds {
		if p.Host != d.Host {
			continue
		}
		for _, n := range p.Report.Nets {
			if n.Dev == d.HCA {
				e.Predicted = "GPUDirect RDMA support " + n.GDR
				e.Agrees = agree(n.GDR == yesNo(d.Enabled), n.GDR == "unknown")
			}
		}
	}
	return e
}

// gpuGDR explains "GPU Direct RDMA Enabled|Disabled for GPU r / HCA id (distance
// d > l)" of ncclTopoCheckGdr, whose numbers are path types in the release's
// numbering.
func (x *explainer) gpuGDR(d GDRLine) LogGDR {
	e := LogGDR{Line: d.Text, Host: d.Host, Agrees: "not compared", Changes: []Change{}}
	dist, ok1 := PathNumber(x.v, d.Distance)
	level, ok2 := PathNumber(x.v, d.Level)
	rule := ruleGdrDisabled
	if d.Enabled {
		rule = ruleGdrEnabled
	}
	e.Rules = cites([]string{rule, ruleCheckGdr}, x.v)
	rank, known := x.gdrRank(d)
	who := "rank " + strconv.Itoa(rank) + "'s GPU"
	if !known {
		who = "GPU " + d.GPUField
	}
	switch {
	case !ok1 || !ok2:
		e.Why = fmt.Sprintf("distance %d and level %d are path types NCCL %s does not number: not understood", d.Distance, d.Level, x.v)
		return e
	case d.Enabled:
		e.Why = fmt.Sprintf("the path from %s to the NIC is %s, within the GPUDirect RDMA level %s (NCCL_NET_GDR_LEVEL, PXB by default)", who, dist, level)
		e.Changes = append(e.Changes, Change{"NCCL_NET_GDR_LEVEL=LOC", "GPU Direct RDMA Disabled for this GPU and NIC"})
	default:
		e.Why = fmt.Sprintf("the path from %s to the NIC is %s, farther than the GPUDirect RDMA level %s (NCCL_NET_GDR_LEVEL, PXB by default)", who, dist, level)
		e.Changes = append(e.Changes, Change{"NCCL_NET_GDR_LEVEL=" + dist.String(), "GPU Direct RDMA Enabled for this GPU and NIC"})
	}
	if gn := x.gpuNet(rank, x.gdrDev(d)); known && gn != nil {
		got := gn.Recv
		if d.Read == 1 {
			got = gn.Send
		}
		e.Predicted = "GPUDirect RDMA " + got + " (path " + gn.Path.String() + ")"
		e.Agrees = agree(got == yesNo(d.Enabled) && gn.Path == dist, got == "unknown")
	}
	return e
}

// gdrCopy explains the GDRCopy line, or its absence (initGdrCopy starts GDRCopy
// only with NCCL_GDRCOPY_ENABLE=1, and ncclGdrInit prints the line once it has
// libgdrapi and gdrdrv).
func (x *explainer) gdrCopy() LogGDRCopy {
	g := LogGDRCopy{Used: x.l.GDRCopy, Line: x.l.GDRCopyLine, Rules: cites([]string{ruleInitGdrCopy, ruleGdrCopyLine}, x.v)}
	enabled, set := x.l.Settings["NCCL_GDRCOPY_ENABLE"]
	switch {
	case x.l.GDRCopy:
		g.Why = "NCCL_GDRCOPY_ENABLE=1 and NCCL opened libgdrapi and gdrdrv: NCCL uses GDRCopy for its host-side flags"
	case set && atoi(enabled) == 1:
		g.Why = "NCCL_GDRCOPY_ENABLE=1, but NCCL printed no GDRCOPY line: libgdrapi.so 2.1 or later or gdrdrv is missing (NCCL's WARN lines say which)"
	case set:
		g.Why = "NCCL_GDRCOPY_ENABLE=" + enabled + ": GDRCopy is off"
	default:
		g.Why = "NCCL_GDRCOPY_ENABLE is not set (NCCL's default is 0): GDRCopy is off"
	}
	return g
}

// paths compares NCCL's path lines of the first predicted host with the
// prediction's.
func (x *explainer) paths(r *LogReport) *PathCheck {
	if len(x.preds) == 0 {
		return nil
	}
	p := x.preds[0]
	got := x.l.HostPaths[p.Host]
	if got == nil && len(x.l.HostPaths) == 1 {
		for _, v := range x.l.HostPaths {
			got = v
		}
	}
	if got == nil {
		return nil
	}
	c := &PathCheck{Host: p.Host}
	want := map[string]string{}
	for _, l := range p.Report.Paths {
		l = strings.TrimRight(l, " ")
		want[strings.SplitN(l, " ", 2)[0]] = l
	}
	for _, l := range got {
		key := strings.SplitN(l, " ", 2)[0]
		if w := want[key]; w == strings.TrimRight(l, " ") {
			c.Equal++
		} else {
			c.Different++
			r.Disagree = append(r.Disagree, Disagreement{What: "path line of " + key, NCCL: l, Predicted: w,
				Explanation: "not explained by a rule p2pcheck knows: a defect of the path computation, or a topology other than NCCL's"})
		}
	}
	return c
}
