package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// validator compiles schema/gdrbench.v1.json.
func validator(t *testing.T) func([]byte) error {
	t.Helper()
	return testsupport.Schema(t, "../../schema/gdrbench.v1.json")
}

// TestSchema validates what every command writes with --format json against
// schema/gdrbench.v1.json: the runs without gdrdrv this machine can do, and
// reports with a row of every command's results as writeJSON encodes them.
func TestSchema(t *testing.T) {
	validate := validator(t)
	root := fakeRoot(t, map[string]string{"proc/modules": modulesWithout, "proc/devices": devicesWithout})
	for _, args := range [][]string{
		{"sanity"}, {"copybw"}, {"copylat", "-s", "64", "-w", "2", "-r", "2"}, {"apiperf", "-s", "65536", "-n", "1", "-w", "0"},
		{"--va", "0x7f0000000000", "copybw", "-s", "65536"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, stdout, stderr := runCLI(t, append([]string{"--root", root, "--format", "json"}, args...)...)
			if err := validate([]byte(stdout)); err != nil {
				t.Errorf("output does not match schema/gdrbench.v1.json: %v\n%s%s", err, stdout, stderr)
			}
		})
	}
	major, minor := uint32(511), uint32(0)
	yes := true
	lat := &latencyJSON{MedianUS: 1.5, MinUS: 1.25}
	full := report{
		GPUs:    []gpuInfo{{Index: 0, Name: "NVIDIA H200", BusID: "0000:18:00.0"}},
		Device:  0,
		GDRDrv:  &readiness{Ready: false, Module: &yes, Major: &major, Node: &nodeInfo{Path: "/dev/gdrdrv", Mode: "crw-rw-rw-", Major: &major, Minor: &minor}, Version: "2.5", OpenError: "permission denied", Problems: []string{"p"}, Fix: "f"},
		Mapping: &mappingInfo{DriverVersion: "2.5", VA: "0x7f0000000000", MappedSize: 65536, PageSize: 65536, Type: "WC", PageOffset: 0},
		Notes:   []string{"note"},
	}
	for _, tt := range []struct {
		tool    string
		results any
	}{
		{"sanity", []sanityResult{{Name: "basic", Status: "pass"}, {Name: "invalidation", Status: "waived", Detail: "why"}}},
		{"copybw", []bwRow{{Size: 65536, Offset: 0, WriteIters: 10, WriteMBps: 1e4, ReadIters: 10, ReadMBps: 100}}},
		{"copylat", []latRow{{Size: 64, ToMapping: lat, FromMapping: lat, HtoD: lat, DtoH: lat}, {Size: 128}}},
		{"apiperf", []apiRow{{Size: 65536, PinUS: 1, MapUS: 2, GetInfoUS: 3, UnmapUS: 4, UnpinUS: 5}}},
	} {
		t.Run("full "+tt.tool, func(t *testing.T) {
			r := full
			r.Tool, r.Results = tt.tool, tt.results
			var b bytes.Buffer
			o := &globalOptions{stdout: &b}
			if err := o.writeJSON(&r); err != nil {
				t.Fatal(err)
			}
			if err := validate(b.Bytes()); err != nil {
				t.Errorf("does not match schema/gdrbench.v1.json: %v\n%s", err, b.String())
			}
		})
	}
	t.Run("rejects", func(t *testing.T) {
		for _, bad := range []string{
			`{"tool": "copybw", "device": 0, "results": []}`,
			`{"schema_version": "2", "tool": "copybw", "device": 0, "results": []}`,
			`{"schema_version": "1", "tool": "copybw", "device": 0, "results": [{"name": "basic", "status": "pass"}]}`,
			`{"schema_version": "1", "tool": "sanity", "device": 0, "results": [{"name": "basic", "status": "ok"}]}`,
			`{"schema_version": "1", "tool": "bench", "device": 0, "results": []}`,
		} {
			if !json.Valid([]byte(bad)) {
				t.Fatalf("not JSON: %s", bad)
			}
			if err := validate([]byte(bad)); err == nil {
				t.Errorf("schema accepted %s", bad)
			}
		}
	})
}
