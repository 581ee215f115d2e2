// Package apitest proves that p2pkit's public packages are usable from another
// module: no exported identifier of node, check or render names an internal type,
// and a program built outside this module runs the report on a snapshot.
package apitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const consumer = `package main

import (
	"fmt"
	"os"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/render"
)

func main() {
	n, err := node.LoadSnapshot(os.Args[1], node.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	gpus := 2 // what the capture is built with: two GPUs, no RDMA NIC
	f := check.NewFacts(n, check.Inputs{Source: check.Snapshot, Expect: &check.Expectation{GPUs: &gpus}})
	results, err := check.Run(f, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	rep := check.NewReport(f, results, check.Meta{Timestamp: time.Now()})
	if err := render.ReportText(os.Stdout, rep, render.Style{}); err != nil {
		os.Exit(3)
	}
	os.Exit(rep.ExitCode)
}
`

// TestExampleModule builds a program in a module of its own that imports node,
// check and render, and runs it on the H200 capture.
func TestExampleModule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module example.com/p2pconsumer\n\ngo 1.26.0\n\nrequire github.com/p2pkit/p2pkit v0.0.0\n\nreplace github.com/p2pkit/p2pkit => " + repo + "\n"
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"go.mod": mod, "go.sum": string(sum), "main.go": consumer} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "consumer")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Dir = dir
	// Everything the consumer needs is in the module cache already: no network.
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of a module importing node, check and render: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, filepath.Join(repo, "testdata/h200-2gpu-vm/snapshot.tar.gz")).Output()
	// The capture is a VM with two GPUs and no NVML facts: nothing confirms P2P,
	// so the report's exit code is 3 (unknown), which the consumer returns.
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 3) {
		t.Fatalf("consumer: %v\n%s", err, out)
	}
	for _, want := range []string{"p2pcheck report (snapshot", "devices: 1 Ethernet NIC, 2 GPU", "overall: "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("consumer output lacks %q:\n%s", want, out)
		}
	}
}
