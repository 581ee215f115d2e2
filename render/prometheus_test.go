package render_test

import (
	"bytes"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/promtext"
	"github.com/p2pkit/p2pkit/render"
)

// writeTextfile writes r as node_exporter reads it and parses it back with
// prometheus/common's parser.
func writeTextfile(t *testing.T, r check.Report) map[string]*dto.MetricFamily {
	t.Helper()
	return testsupport.Metrics(t, bytes.NewReader(text(t, render.PrometheusRegistry(r, 1500*time.Millisecond))))
}

// text returns what reg writes.
func text(t *testing.T, reg *promtext.Registry, extra ...promtext.Label) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := reg.Write(&b, extra...); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// series flattens a family to "label=value,... value" strings, sorted.
func series(f *dto.MetricFamily) []string {
	var out []string
	for _, m := range f.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		v := m.GetGauge().GetValue()
		if c := m.GetCounter(); c != nil {
			v = c.GetValue()
		}
		out = append(out, strings.Join(ls, ",")+" "+strconvG(v))
	}
	sort.Strings(out)
	return out
}

func strconvG(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func TestPrometheus(t *testing.T) {
	fams := writeTextfile(t, machineReport(t, "degraded-link"))
	for name, f := range fams {
		// A counter's name ends in _total, and only a counter's does.
		want := dto.MetricType_GAUGE
		if strings.HasSuffix(name, "_total") {
			want = dto.MetricType_COUNTER
		}
		if !strings.HasPrefix(name, "p2pcheck_") || f.GetHelp() == "" || f.GetType() != want {
			t.Errorf("%s: prefix, help %q, type %s, want %s", name, f.GetHelp(), f.GetType(), want)
		}
		if !model.LegacyValidation.IsValidMetricName(name) {
			t.Errorf("%s is not a valid metric name", name)
		}
		for _, m := range f.GetMetric() {
			if m.TimestampMs != nil {
				t.Errorf("%s carries a timestamp; the textfile collector rejects them", name)
			}
		}
	}
	for _, tt := range []struct {
		family string
		want   []string
	}{
		// Two GPUs and no RDMA NIC: gdr, required by default, has nothing to judge.
		{"p2pcheck_overall_status", []string{" 5"}},
		{"p2pcheck_exit_code", []string{" 3"}},
		{"p2pcheck_devices", []string{"kind=GPU 2"}},
		{"p2pcheck_pcie_link_width", []string{
			"bdf=0000:03:00.0,kind=GPU,state=current 16", "bdf=0000:03:00.0,kind=GPU,state=max 16",
			"bdf=0000:04:00.0,kind=GPU,state=current 8", "bdf=0000:04:00.0,kind=GPU,state=max 16",
		}},
		{"p2pcheck_pcie_link_generation", []string{
			"bdf=0000:03:00.0,kind=GPU,state=current 5", "bdf=0000:03:00.0,kind=GPU,state=max 5",
			"bdf=0000:04:00.0,kind=GPU,state=current 4", "bdf=0000:04:00.0,kind=GPU,state=max 5",
		}},
		{"p2pcheck_bar1_total_bytes", []string{"bdf=0000:03:00.0,gpu=0 137438953472", "bdf=0000:04:00.0,gpu=1 137438953472"}},
		{"p2pcheck_last_run_timestamp_seconds", []string{" 1796014800"}},
		{"p2pcheck_run_duration_seconds", []string{" 1.5"}},
		{"p2pcheck_build_info", []string{"cuda=,driver=570.133.20,version=v1.0.0 1"}},
	} {
		f, ok := fams[tt.family]
		if !ok {
			t.Errorf("no %s", tt.family)
			continue
		}
		if diff := cmp.Diff(tt.want, series(f)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.family, diff)
		}
	}
	status := series(fams["p2pcheck_check_status"])
	for _, want := range []string{"check=gdrdrv,subject= 1", "check=pcie_link,subject= 1", "check=pcie_link,subject=0000:04:00.0 1", "check=acs_path,subject= 0", "check=p2p_data_integrity,subject= 3"} {
		if !contains(status, want) {
			t.Errorf("p2pcheck_check_status lacks %q in %q", want, status)
		}
	}
}

// TestPrometheusProbe: the probe's bandwidth and verification become series.
func TestPrometheusProbe(t *testing.T) {
	r := machineReport(t, "degraded-link")
	r.Probe = &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{
		{Src: 0, Dst: 1, PeerAccess: true, Verified: true, HostVerified: true, Mismatch: -1, BytesPerSecond: 4.8e10},
		{Src: 1, Dst: 0, PeerAccess: true, Verified: false, HostVerified: true, Mismatch: 12, BytesPerSecond: 4.7e10},
		{Src: 2, Dst: 0, Mismatch: -1},
	}}
	fams := writeTextfile(t, r)
	if diff := cmp.Diff([]string{"dst_gpu=0,engine=ce,src_gpu=1 47000000000", "dst_gpu=1,engine=ce,src_gpu=0 48000000000"}, series(fams["p2pcheck_p2p_bandwidth_bytes_per_second"])); diff != "" {
		t.Errorf("bandwidth (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"dst_gpu=0,src_gpu=1 0", "dst_gpu=1,src_gpu=0 1"}, series(fams["p2pcheck_p2p_data_verified"])); diff != "" {
		t.Errorf("verified (-want +got):\n%s", diff)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestPrometheusMode: ModeLabel labels every series with the run's mode, so
// that the --quick and the full textfile of one node share no series; the
// families and values are otherwise those of the registry.
func TestPrometheusMode(t *testing.T) {
	r := machineReport(t, "dgx-h100")
	reg := render.PrometheusRegistry(r, time.Second)
	plain := testsupport.Metrics(t, bytes.NewReader(text(t, reg)))
	seen := map[string]string{}
	for _, mode := range []string{render.Mode(true, false), render.Mode(false, false), render.Mode(false, true)} {
		mfs := testsupport.Metrics(t, bytes.NewReader(text(t, reg, render.ModeLabel(mode))))
		if len(mfs) != len(plain) {
			t.Fatalf("%s: %d families, want %d", mode, len(mfs), len(plain))
		}
		for _, mf := range mfs {
			for _, s := range series(mf) {
				key := mf.GetName() + "{" + s[:strings.LastIndexByte(s, ' ')] + "}"
				if !strings.Contains(key, "mode="+mode) {
					t.Fatalf("%s has no mode=%s", key, mode)
				}
				if m, ok := seen[key]; ok {
					t.Errorf("%s in %s and %s", key, m, mode)
				}
				seen[key] = mode
			}
			for _, m := range mf.GetMetric() {
				if !slices.IsSortedFunc(m.GetLabel(), func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) }) {
					t.Errorf("%s: labels not sorted", mf.GetName())
				}
			}
		}
	}
	if diff := cmp.Diff([]string{"quick", "full", "probe"}, []string{render.Mode(true, false), render.Mode(false, false), render.Mode(false, true)}); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
	if fams := writeTextfile(t, r); len(series(fams["p2pcheck_devices"])) != 3 {
		t.Errorf("p2pcheck_devices = %q, want GPU, RDMA NIC and NVMe", series(fams["p2pcheck_devices"]))
	}
}
