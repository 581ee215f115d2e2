package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/pcie"
)

const h2001GPU = "../../testdata/h200-1gpu-live/"

// TestH200LiveOffline reads the snapshot taken on a live H200 machine (redacted,
// NVML facts recorded) and compares each command's output with what the same
// binary printed live there, with no pci.ids on that machine. The report may differ
// only where a snapshot cannot know what a process knew: its time, the source,
// RLIMIT_MEMLOCK and the NCCL environment.
func TestH200LiveOffline(t *testing.T) {
	snap := h2001GPU + "snapshot.tar.gz"
	for _, tt := range []struct {
		golden string
		args   []string
		newer  []string // JSON fields the live build did not write yet
	}{
		{"topo.json", []string{"--format", "json", "topo"}, nil},
		// grid_devices and pairs came after the live capture (schema 1 only adds).
		{"matrix.json", []string{"--format", "json", "matrix"}, []string{"grid_devices", "pairs"}},
		{"matrix.txt", []string{"matrix"}, nil},
		{"pairs.json", []string{"--format", "json", "pairs"}, nil},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			want, err := os.ReadFile(h2001GPU + tt.golden)
			if err != nil {
				t.Fatal(err)
			}
			// That machine had no pci.ids at all: name none here either. A
			// --pci-ids that is missing is a usage error; one that is not a
			// regular file leaves the names out.
			noIDs := os.DevNull
			code, got, stderr := p2pcheck(append([]string{"--snapshot", snap, "--pci-ids", noIDs}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if strings.HasSuffix(tt.golden, ".json") {
				// The warnings name where pci.ids was looked for, which differs
				// between that machine and this one; everything else must not.
				for _, k := range tt.newer {
					if !strings.Contains(got, `"`+k+`":`) {
						t.Errorf("the output lacks %q", k)
					}
				}
				want, got = withoutWarnings(t, want, tt.newer...), string(withoutWarnings(t, []byte(got), tt.newer...))
			}
			if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); diff != "" {
				t.Errorf("snapshot output differs from the live one (-live +snapshot):\n%s", diff)
			}
		})
	}

	t.Run("report.json", func(t *testing.T) {
		type check struct{ ID, Status, Summary string }
		type report struct {
			Overall string
			Checks  []check
		}
		read := func(b []byte) map[string]check {
			var r report
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			m := map[string]check{"overall": {Status: r.Overall}}
			for _, c := range r.Checks {
				if c.ID != "memlock_limit" && c.ID != "nccl_env" {
					m[c.ID] = c
				}
			}
			return m
		}
		want, err := os.ReadFile(h2001GPU + "report.json")
		if err != nil {
			t.Fatal(err)
		}
		_, got, _ := p2pcheck("--snapshot", snap, "--format", "json", "report")
		live, offline := read(want), read([]byte(got))
		for id := range offline {
			if _, ok := live[id]; !ok {
				delete(offline, id) // a check added after the live run (virt_host, acs_drift)
			}
		}
		if diff := cmp.Diff(live, offline); diff != "" {
			t.Errorf("checks differ (-live +snapshot):\n%s", diff)
		}
		if !strings.Contains(got, `"GPU-redacted-0"`) {
			t.Errorf("the recorded NVML facts are not in the report")
		}
	})

	t.Run("redacted", func(t *testing.T) {
		f, err := os.Open(snap)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		configs := 0
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(hdr.Name, "/vpd") || strings.HasSuffix(hdr.Name, "/serial_number") {
				t.Errorf("%s captured", hdr.Name)
			}
			if !strings.HasSuffix(hdr.Name, "/config") {
				continue
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			c, err := pcie.ParseConfig(b)
			if err != nil {
				continue
			}
			configs++
			for _, e := range c.ExtCapabilities {
				if e.ID == 0x0003 && int(e.Offset)+12 <= len(b) && strings.Trim(string(b[e.Offset+4:e.Offset+12]), "\x00") != "" {
					t.Errorf("%s: Device Serial Number % x not zeroed", hdr.Name, b[e.Offset+4:e.Offset+12])
				}
			}
		}
		if configs == 0 {
			t.Errorf("no config files in the snapshot")
		}
	})
}

// withoutWarnings returns a JSON object without its "warnings" member and the
// members named in also, indented.
func withoutWarnings(t *testing.T, b []byte, also ...string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "warnings")
	for _, k := range also {
		delete(m, k)
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}
