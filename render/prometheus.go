package render

import (
	"strconv"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/promtext"
)

// StatusValue is the number a status takes in the p2pcheck_check_status and
// p2pcheck_overall_status metrics: 0 pass, 1 warn, 2 fail, 3 skip, 4 error,
// 5 unknown.
func StatusValue(s check.Status) float64 {
	switch s {
	case check.Pass:
		return 0
	case check.Warn:
		return 1
	case check.Fail:
		return 2
	case check.Skip:
		return 3
	case check.Unknown:
		return 5
	}
	return 4
}

// PrometheusRegistry returns a registry holding the report as metrics for
// node_exporter's textfile collector (prometheus/node_exporter,
// collector/textfile.go):
//
//   - p2pcheck_check_status{check,subject}: every check with subject "" and
//     every finding that needs attention with its subject
//   - p2pcheck_overall_status, p2pcheck_exit_code, p2pcheck_up (1; 0 in the
//     file of a run that could not evaluate the node, PrometheusUnevaluated)
//   - p2pcheck_pcie_link_width{bdf,kind,state} and
//     p2pcheck_pcie_link_generation{bdf,kind,state}, state "current" or "max"
//   - p2pcheck_bar1_total_bytes{gpu,bdf}, p2pcheck_bar1_used_bytes{gpu,bdf}
//   - p2pcheck_pcie_aer_errors_total{bdf,severity}: the AER totals since boot
//     of the functions on peer paths, severity "correctable", "nonfatal" or
//     "fatal", a counter (the kernel's aer_dev_* counts, which reset only at
//     boot), which [PreviousAER] reads back
//   - p2pcheck_devices{kind}: the devices of interest of each kind, in the
//     words of the report ("GPU", "RDMA NIC", "Ethernet NIC", "NVMe", ...)
//   - p2pcheck_p2p_bandwidth_bytes_per_second{src_gpu,dst_gpu,engine} and
//     p2pcheck_p2p_data_verified{src_gpu,dst_gpu} from --probe
//   - p2pcheck_last_run_timestamp_seconds, p2pcheck_run_duration_seconds
//   - p2pcheck_build_info{version,driver,cuda} 1
//
// Status values are those of StatusValue. No sample carries a timestamp: the
// textfile collector rejects them. The command writes the registry with
// [ModeLabel], which labels every series with the kind of run.
func PrometheusRegistry(r check.Report, duration time.Duration) *promtext.Registry {
	reg := new(promtext.Registry)
	status := reg.Gauge("p2pcheck_check_status", "Status of a p2pcheck check (0 pass, 1 warn, 2 fail, 3 skip, 4 error, 5 unknown); subject \"\" is the whole check.", "check", "subject")
	for _, c := range r.Checks {
		status.Set(StatusValue(c.Status), c.ID, "")
		seen := map[string]float64{}
		for _, f := range c.Findings {
			if f.Status == check.Pass {
				continue
			}
			if v, ok := seen[f.Subject]; ok && v >= StatusValue(f.Status) {
				continue
			}
			seen[f.Subject] = StatusValue(f.Status)
			status.Set(StatusValue(f.Status), c.ID, f.Subject)
		}
	}
	reg.Gauge("p2pcheck_overall_status", "Overall node status (0 pass, 1 warn, 2 fail, 4 error, 5 unknown).").Set(StatusValue(r.Overall))

	kinds := reg.Gauge("p2pcheck_devices", "Devices of interest of each kind (GPU, RDMA NIC, Ethernet NIC, NVMe, accelerator, p2pmem).", "kind")
	for _, d := range r.Devices {
		kinds.Add(1, d.Kind)
	}
	width := reg.Gauge("p2pcheck_pcie_link_width", "PCIe link width in lanes of a device of interest.", "bdf", "kind", "state")
	gen := reg.Gauge("p2pcheck_pcie_link_generation", "PCIe link generation (1 = 2.5 GT/s ... 6 = 64 GT/s) of a device of interest.", "bdf", "kind", "state")
	bar1 := reg.Gauge("p2pcheck_bar1_total_bytes", "Size of an NVIDIA GPU's BAR1 aperture in bytes (NVML, else sysfs).", "gpu", "bdf")
	bar1Used := reg.Gauge("p2pcheck_bar1_used_bytes", "BAR1 bytes in use on an NVIDIA GPU (NVML).", "gpu", "bdf")
	for _, d := range r.Devices {
		bdf := d.BDF.String()
		if l := d.Link; l != nil {
			set := func(g *promtext.Family, state string, v int) {
				if v > 0 {
					g.Set(float64(v), bdf, d.Kind, state)
				}
			}
			set(width, "current", l.CurrentWidth)
			set(width, "max", l.MaxWidth)
			set(gen, "current", l.CurrentGen)
			set(gen, "max", l.MaxGen)
		}
		if d.Index == nil {
			continue
		}
		idx := strconv.Itoa(*d.Index)
		switch {
		case d.BAR1Total != nil:
			bar1.Set(float64(*d.BAR1Total), idx, bdf)
		case d.BAR1Bytes != nil:
			bar1.Set(float64(*d.BAR1Bytes), idx, bdf)
		}
		if d.BAR1Used != nil {
			bar1Used.Set(float64(*d.BAR1Used), idx, bdf)
		}
	}
	if len(r.AER) > 0 {
		aer := reg.Counter(aerMetric,
			"AER errors the kernel counted for a function on a peer path since boot (aer_dev_*); read back by the next run to judge growth.",
			"bdf", "severity")
		for _, a := range r.AER {
			bdf := a.BDF.String()
			aer.Add(float64(a.Correctable), bdf, "correctable")
			aer.Add(float64(a.NonFatal), bdf, "nonfatal")
			aer.Add(float64(a.Fatal), bdf, "fatal")
		}
	}
	if p := r.Probe; p != nil {
		bw := reg.Gauge("p2pcheck_p2p_bandwidth_bytes_per_second", "Peer-to-peer copy bandwidth measured by --probe.", "src_gpu", "dst_gpu", "engine")
		ok := reg.Gauge("p2pcheck_p2p_data_verified", "1 when --probe found the copied pattern intact, 0 when not.", "src_gpu", "dst_gpu")
		for _, pp := range p.Pairs {
			if !pp.PeerAccess || pp.Err != "" {
				continue
			}
			src, dst := strconv.Itoa(pp.Src), strconv.Itoa(pp.Dst)
			bw.Set(pp.BytesPerSecond, src, dst, "ce")
			ok.Set(boolFloat(pp.Verified && pp.HostVerified), src, dst)
		}
	}
	runMetrics(reg, Run{Up: true, ExitCode: r.ExitCode, Start: r.Timestamp, Duration: duration,
		ToolVersion: r.ToolVersion, Driver: r.Environment.Driver, CUDA: r.Environment.CUDA})
	return reg
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// The kinds of run a textfile comes from, the value of its "mode" label.
const (
	ModeQuick = "quick" // --quick: sysfs, /proc and config space only (NHC, the DaemonSet)
	ModeFull  = "full"  // the full report, NVML included
	ModeProbe = "probe" // the full report with the --probe copies
)

// Mode returns the kind of run of a report with --quick or --probe.
func Mode(quick, probe bool) string {
	switch {
	case quick:
		return ModeQuick
	case probe:
		return ModeProbe
	}
	return ModeFull
}

// ModeLabel returns the label mode="quick", "full" or "probe" that the command
// writes on every series. node_exporter's textfile collector
// (prometheus/node_exporter, collector/textfile.go) merges the families of every
// *.prom file in its directory and drops series that two files both have, so a
// node that writes the --quick report (p2pcheck-quick.prom) and the full one
// (p2pcheck.prom) side by side needs the label to keep both: no series of one
// file can equal a series of the other.
func ModeLabel(mode string) promtext.Label { return promtext.Label{Name: "mode", Value: mode} }
