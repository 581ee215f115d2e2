package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gdrcopy"
	"github.com/p2pkit/p2pkit/internal/cuda"
)

// runCLI runs gdrbench with args and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsageErrors(t *testing.T) {
	tests := [][]string{
		{"nosuch"},
		{"--format", "yaml", "copylat"},
		{"-d", "-1", "copybw"},
		{"--va", "0x1234", "copybw"},
		{"--va", "nope", "copybw"},
		{"copybw", "-o", "3"},
		{"copybw", "-s", "100", "-c", "200"},
		{"copybw", "-w", "0"},
		{"copylat", "-s", "0"},
		{"copylat", "extra-arg"},
		{"apiperf", "-s", "4096"},
		{"apiperf", "--peer", "/bin/true"},
		{"apiperf", "--copies", "--rounds", "0"},
		{"apiperf", "--copies", "-s", "0"},
		{"apiperf", "--serve"},
		{"apiperf", "--copies", "--serve", "--peer", "x"},
		{"apiperf", "--cpu", "0"},
		{"apiperf", "--copies", "--cpu", "-2"},
		{"apiperf", "--copies", "--cpu", "1048576"},
		{"apiperf", "--copies", "--serve", "--cpu", "0"},
		{"sanity", "-t", "no_such_test"},
		{"sanity", "--bogus"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d (usage); stderr:\n%s", code, exitUsage, stderr)
			}
			if stdout != "" || !strings.HasPrefix(stderr, "gdrbench: ") {
				t.Errorf("want only a gdrbench: message on stderr, got stdout %q stderr %q", stdout, stderr)
			}
		})
	}
}

func TestSanityList(t *testing.T) {
	code, stdout, _ := runCLI(t, "sanity", "-l")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var got, want []string
	for line := range strings.Lines(stdout) {
		name, _, _ := strings.Cut(line, "\t")
		got = append(got, name)
	}
	for _, tt := range sanityTests {
		want = append(want, tt.name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sanity -l (-want +got):\n%s", diff)
	}
}

// jsonReport is the part of the JSON report the tests look at.
type jsonReport struct {
	Tool   string `json:"tool"`
	Device int    `json:"device"`
	VA     string `json:"va"`
	GDRDrv *struct {
		Ready    bool     `json:"ready"`
		Problems []string `json:"problems"`
		Fix      string   `json:"fix"`
	} `json:"gdrdrv"`
	Results json.RawMessage `json:"results"`
	Notes   []string        `json:"notes"`
}

// haveGPU reports whether CUDA works here, so that the tests know whether
// gdrbench measured its cuMemcpy baseline.
func haveGPU() bool {
	n, err := cuda.DeviceCount()
	return err == nil && n > 0
}

// TestNotReady runs every command against a root where gdrdrv is missing:
// each must diagnose it and exit 2; copylat still measures the baseline when
// there is a GPU.
func TestNotReady(t *testing.T) {
	root := fakeRoot(t, map[string]string{"proc/modules": modulesWithout, "proc/devices": devicesWithout})
	wantProblems := []string{
		"the gdrdrv kernel module is not loaded (not in /proc/modules)",
		"/dev/gdrdrv does not exist",
	}
	tests := []struct {
		args      []string
		wantTool  string
		wantSizes int // copylat rows; 0 for the others
	}{
		{[]string{"copylat", "-s", "64", "-w", "20", "-r", "20"}, "copylat", 7},
		{[]string{"copybw"}, "copybw", 0},
		{[]string{"apiperf", "-s", "65536", "-n", "2", "-w", "0"}, "apiperf", 0},
		{[]string{"sanity"}, "sanity", 0},
		{[]string{"--va", "0x7f0000000000", "copybw", "-s", "65536"}, "copybw", 0},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			args := append([]string{"--root", root, "--format", "json"}, tt.args...)
			code, stdout, stderr := runCLI(t, args...)
			if code != exitNotReady {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitNotReady, stderr)
			}
			var rep jsonReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("stdout is not one JSON report: %v\n%s", err, stdout)
			}
			if rep.Tool != tt.wantTool || rep.GDRDrv == nil || rep.GDRDrv.Ready {
				t.Fatalf("report %+v: want tool %s and gdrdrv not ready", rep, tt.wantTool)
			}
			if diff := cmp.Diff(wantProblems, rep.GDRDrv.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if !strings.Contains(rep.GDRDrv.Fix, "insmod.sh") {
				t.Errorf("fix %q does not say how to load gdrdrv", rep.GDRDrv.Fix)
			}
			if tt.args[0] == "--va" && rep.VA != "0x7f0000000000" {
				t.Errorf("va = %q, want 0x7f0000000000", rep.VA)
			}
			if tt.wantSizes == 0 {
				return
			}
			var rows []latRow
			if err := json.Unmarshal(rep.Results, &rows); err != nil {
				t.Fatal(err)
			}
			if len(rows) != tt.wantSizes {
				t.Fatalf("%d copylat rows, want %d", len(rows), tt.wantSizes)
			}
			for _, r := range rows {
				if r.ToMapping != nil || r.FromMapping != nil {
					t.Errorf("size %d: mapping latency without gdrdrv", r.Size)
				}
				if haveGPU() != (r.HtoD != nil && r.DtoH != nil) {
					t.Errorf("size %d: GPU present %v but baseline %+v %+v", r.Size, haveGPU(), r.HtoD, r.DtoH)
				}
			}
			if !haveGPU() && (len(rep.Notes) != 1 || !strings.HasPrefix(rep.Notes[0], "no cuMemcpy baseline")) {
				t.Errorf("notes %q: want one saying why there is no baseline", rep.Notes)
			}
		})
	}

	// The same in text: the diagnosis goes to stderr.
	code, _, stderr := runCLI(t, "--root", root, "copybw")
	if code != exitNotReady {
		t.Fatalf("text copybw: exit %d, want %d", code, exitNotReady)
	}
	for _, want := range append(wantProblems, "gdrdrv is not usable:", "fix first: ") {
		if !strings.Contains(stderr, want) {
			t.Errorf("text diagnosis lacks %q:\n%s", want, stderr)
		}
	}
}

// requireGDR skips unless this machine has both a GPU and gdrdrv; under
// P2PKIT_REQUIRE_HW=1 it fails instead.
func requireGDR(t *testing.T) {
	t.Helper()
	var why error
	if n, err := cuda.DeviceCount(); err != nil {
		why = err
	} else if n == 0 {
		why = errors.New("no CUDA device")
	} else if d, err := gdrcopy.Open(); err != nil {
		why = err
	} else {
		d.Close()
		return
	}
	if os.Getenv("P2PKIT_REQUIRE_HW") == "1" {
		t.Fatalf("P2PKIT_REQUIRE_HW=1 but: %v", why)
	}
	t.Skipf("needs a GPU and gdrdrv: %v", why)
}

// TestBenchmarksHW runs every command for real, small, on GPU 0.
func TestBenchmarksHW(t *testing.T) {
	requireGDR(t)
	t.Run("sanity", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "sanity")
		if code != exitOK {
			t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
		}
		t.Log(stdout)
	})
	t.Run("copylat", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "--format", "json", "copylat", "-c", "-s", "65536", "-w", "200", "-r", "20")
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		var rep jsonReport
		var rows []latRow
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(rep.Results, &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.ToMapping == nil || r.ToKernel == nil || r.FromMapping == nil || r.FromKernel == nil || r.HtoD == nil || r.DtoH == nil {
				t.Errorf("size %d: a column is missing: %+v", r.Size, r)
			}
		}
	})
	t.Run("copybw", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "copybw", "-l", "-s", "65536", "-w", "100", "-r", "10")
		if code != exitOK {
			t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
		}
	})
	t.Run("apiperf", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "apiperf", "-s", "131072", "-n", "3", "-w", "1")
		if code != exitOK {
			t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
		}
	})
}
