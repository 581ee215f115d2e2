package nccl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func parseFiles(t *testing.T, names ...string) *Log {
	t.Helper()
	var srcs []LogSource
	for _, n := range names {
		f, err := os.Open(filepath.Join(testdata, n))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		srcs = append(srcs, LogSource{Name: n, R: f})
	}
	l, err := ParseLogs(srcs)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// explainPrinted explains l with a prediction for every host that printed its
// topology.
func explainPrinted(t *testing.T, l *Log, v Version) *LogReport {
	t.Helper()
	var preds []Prediction
	for _, h := range l.Hosts() {
		if _, ok := l.Systems[h]; !ok {
			continue
		}
		in, err := LogInput(l, h, nil, v, "test")
		if err != nil {
			t.Fatal(err)
		}
		r, err := Predict(in)
		if err != nil {
			t.Fatal(err)
		}
		preds = append(preds, Prediction{Host: h, Report: r})
	}
	return ExplainLog(l, v, "test", "test", preds)
}

// checkExplained checks that every channel and GPU Direct RDMA line of l is
// explained with a rule, and returns the explanation.
func checkExplained(t *testing.T, l *Log, r *LogReport) {
	t.Helper()
	lines := 0
	for _, g := range r.Channels {
		lines += g.Lines
		if g.Why == "" || len(g.Rules) == 0 {
			t.Errorf("channel %d -> %d via %s: no explanation (%q) or rule", g.From, g.To, g.Via, g.Why)
		}
	}
	if lines != len(l.Channels) {
		t.Errorf("%d channel lines in the groups, %d in the log", lines, len(l.Channels))
	}
	if len(r.GDR) != len(l.GDR) {
		t.Errorf("%d GPU Direct RDMA lines explained of %d", len(r.GDR), len(l.GDR))
	}
	for _, g := range r.GDR {
		if g.Why == "" || len(g.Rules) == 0 || strings.Contains(g.Why, "not understood") {
			t.Errorf("%q: explanation %q, rules %v", g.Line, g.Why, g.Rules)
		}
	}
}

// TestLogH200 is #24's third acceptance point on the H200 runs: every channel
// and GPU Direct RDMA line of NCCL's logs is explained, every line is understood
// or known to decide nothing, and the prediction for the topology NCCL printed
// agrees with NCCL: the same path lines and labels, no disagreement.
func TestLogH200(t *testing.T) {
	for _, tt := range []struct {
		name     string
		logs     []string
		channels int
	}{
		{"one rank", []string{"h200-1gpu-offline/nccl-info-0.log"}, 0},
		{"one rank, p2pcheck's XML", []string{"h200-1gpu-offline/nccl-info-topofile-0.log"}, 0},
		{"two ranks as two hosts", []string{"h200-1gpu-offline/nccl-2rank-0.log", "h200-1gpu-offline/nccl-2rank-1.log"}, 8},
		{"two ranks with settings", []string{"h200-1gpu-offline/nccl-2rank-settings-0.log", "h200-1gpu-offline/nccl-2rank-settings-1.log"}, 8},
		{"earlier run", []string{"h200-1gpu/nccl-info.log"}, 0},
		{"configuration files", []string{"h200-1gpu-conf/nccl-info-conf.log"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := parseFiles(t, tt.logs...)
			r := explainPrinted(t, l, l.Version)
			checkExplained(t, l, r)
			if len(l.Channels) != tt.channels {
				t.Errorf("%d channel lines; want %d", len(l.Channels), tt.channels)
			}
			if r.NotUndCount != 0 {
				t.Errorf("not understood: %q", r.NotUnderst)
			}
			if len(r.Disagree) != 0 {
				t.Errorf("disagreements: %+v", r.Disagree)
			}
			for _, g := range r.Channels {
				if len(l.Systems) > 0 && g.Agrees != "yes" {
					t.Errorf("channel %d -> %d via %s: predicted %q, agrees %s", g.From, g.To, g.Via, g.Predicted, g.Agrees)
				}
			}
			if len(l.Systems) > 0 && (r.PathLines == nil || r.PathLines.Equal == 0 || r.PathLines.Different != 0) {
				t.Errorf("path lines %+v", r.PathLines)
			}
		})
	}
}

// TestLogDisagreement names a disagreement: told that the NIC supports
// GPUDirect RDMA and that any distance allows it, the prediction labels the
// two-host connections NET/Socket/0/GDRDMA, where NCCL printed NET/Socket/0.
func TestLogDisagreement(t *testing.T) {
	l := parseFiles(t, "h200-1gpu-offline/nccl-2rank-0.log", "h200-1gpu-offline/nccl-2rank-1.log")
	x := readXML(t, filepath.Join(testdata, "h200-1gpu-offline/nccl-topo-2rank.xml"))
	x.Walk(func(n *Node) {
		if n.Name == "net" {
			n.SetInt("gdr", 1)
		}
	})
	r, err := Predict(FileInput(x, "Socket", LogSettings(l, map[string]string{"NCCL_NET_GDR_LEVEL": "SYS"}), l.Version, "test"))
	if err != nil {
		t.Fatal(err)
	}
	rep := ExplainLog(l, l.Version, "test", "test", []Prediction{{Host: l.Hosts()[0], Report: r}})
	found := false
	for _, d := range rep.Disagree {
		if d.NCCL == "NET/Socket/0" && d.Predicted == "NET/Socket/0/GDRDMA" {
			found = true
		}
	}
	if !found {
		t.Errorf("no disagreement on GPUDirect RDMA: %+v", rep.Disagree)
	}
}

// TestLogPublic explains excerpts of logs users posted in NCCL's issue threads
// (testdata/nccl/public/README.md), of releases older than the H200's: their
// channel lines with bus IDs in brackets, ranks placed on hosts by the lines'
// prefixes, P2P/IPC/read and P2P/direct pointer/read, an external plugin's GPU
// Direct RDMA lines, and a GPU Direct RDMA decision whose numbers are path types
// in the numbering of the release (distance 7 and level 4 are SYS and PXB before
// 2.26, PXN and PIX from 2.27.5).
func TestLogPublic(t *testing.T) {
	l := parseFiles(t, "public/nccl-tests-128.log")
	r := ExplainLog(l, Version{2, 10, 3}, "test", "none", nil)
	checkExplained(t, l, r)
	for _, g := range r.Channels {
		if g.Transport == "NET" && !strings.Contains(g.Why, "different hosts (hostA, hostB)") && !strings.Contains(g.Why, "different hosts (hostB, hostA)") {
			t.Errorf("%d -> %d: %s", g.From, g.To, g.Why)
		}
		if g.Transport == "P2P" && !strings.Contains(g.Why, "read: ") {
			t.Errorf("%d -> %d: %s", g.From, g.To, g.Why)
		}
	}
	for _, tt := range []struct {
		v    Version
		want string
	}{
		{Version{2, 19, 3}, "is SYS, farther than the GPUDirect RDMA level PXB"},
		{Version{2, 28, 9}, "is PXN, farther than the GPUDirect RDMA level PIX"},
	} {
		l := parseFiles(t, "public/nccl-1151.log")
		r := ExplainLog(l, tt.v, "test", "none", nil)
		checkExplained(t, l, r)
		if len(r.GDR) != 1 || !strings.Contains(r.GDR[0].Why, tt.want) {
			t.Errorf("%s: %+v; want %q", tt.v, r.GDR, tt.want)
		}
	}
	l = parseFiles(t, "public/nccl-1511.log")
	r = ExplainLog(l, Version{2, 18, 3}, "test", "none", nil)
	checkExplained(t, l, r)
	if len(r.Channels) != 2 || !strings.Contains(r.Channels[0].Why, "one process") || len(l.Paths) != 2 {
		t.Errorf("channels %+v, %d path lines", r.Channels, len(l.Paths))
	}
	l = parseFiles(t, "public/nccl-1519.log")
	r = ExplainLog(l, Version{2, 23, 4}, "test", "none", nil)
	checkExplained(t, l, r)
	if len(r.GDR) != 2 || !strings.Contains(r.GDR[0].Why, "external plugins") {
		t.Errorf("%+v", r.GDR)
	}
}

// TestLogNotUnderstood reports a line it does not know as such, and guesses
// nothing from it; a line longer than it reads is skipped and counted.
func TestLogNotUnderstood(t *testing.T) {
	in := "h:1:1 [0] NCCL INFO NCCL version 2.31.0+cuda14.0\n" +
		"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via QUANTUM/entangled\n" +
		"h:1:1 [0] NCCL INFO Transport selection: QUANTUM chosen for ranks 0 and 1\n" +
		"h:1:1 [0] NCCL INFO " + strings.Repeat("x", maxLogLine) + "\n" +
		"h:1:1 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 0 / HCA 0 (distance 99 <= 4), read 1 mode Default\n" +
		"just the job's output\n"
	l, err := ParseLogs([]LogSource{{Name: "in", R: strings.NewReader(in)}})
	if err != nil {
		t.Fatal(err)
	}
	r := ExplainLog(l, l.Version, "the log", "none", nil)
	if r.NotUndCount != 1 || r.NotUnderst[0] != "Transport selection: QUANTUM chosen for ranks 0 and 1" || r.Skipped != 1 {
		t.Errorf("not understood %d %q, skipped %d", r.NotUndCount, r.NotUnderst, r.Skipped)
	}
	if len(r.Channels) != 1 || !strings.Contains(r.Channels[0].Why, "does not explain") {
		t.Errorf("channels %+v", r.Channels)
	}
	if len(r.GDR) != 1 || !strings.Contains(r.GDR[0].Why, "not understood") {
		t.Errorf("GDR %+v", r.GDR)
	}
	if !strings.Contains(r.Sources, "no source lines for NCCL 2.31.0") {
		t.Errorf("sources %q", r.Sources)
	}
}

// FuzzExplainLog parses any log, reads back any topology it printed, predicts
// for it and explains the log: nothing panics.
func FuzzExplainLog(f *testing.F) {
	for _, p := range []string{"h200-1gpu-offline/nccl-2rank-0.log", "public/nccl-tests-128.log", "public/nccl-1151.log"} {
		if b, err := os.ReadFile(filepath.Join(testdata, p)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("NCCL INFO === System : maxBw 1.0 totalBw 1.0 ===\nNCCL INFO CPU/0 (1/1/2)\nNCCL INFO + PCI[24.0] - GPU/1000 (0)\nNCCL INFO                 + NVL[5.0] - NVS/0\nNCCL INFO ===\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLogs([]LogSource{{Name: "f", R: strings.NewReader(string(b))}})
		if err != nil {
			return
		}
		var preds []Prediction
		for h := range l.Systems {
			if in, err := LogInput(l, h, nil, l.Version, "f"); err == nil {
				if r, err := Predict(in); err == nil {
					preds = append(preds, Prediction{Host: h, Report: r})
				}
			}
		}
		r := ExplainLog(l, l.Version, "f", "f", preds)
		var sb strings.Builder
		_ = r.WriteText(&sb)
	})
}

// FuzzParseHost reads any recorded host facts without panicking, and keeps
// only what is within its bounds.
func FuzzParseHost(f *testing.F) {
	f.Add([]byte(`{"env":{"NCCL_P2P_LEVEL":"SYS"},"home":"/root","interfaces":["eth0"],"lib":{"version":"2.28.9","path":"/x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHost(b)
		if err != nil {
			return
		}
		for k := range h.Env {
			if !strings.HasPrefix(k, "NCCL_") {
				t.Fatalf("variable %q kept", k)
			}
		}
	})
}
