package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gdrcopySrcEnv names a gdrcopy source tree (a clone of
// https://github.com/NVIDIA/gdrcopy) to build the libgdrapi peer against.
const gdrcopySrcEnv = "P2PKIT_GDRCOPY_SRC"

// TestGdrapiPeer builds the libgdrapi peer (cmd/gdrbench/gdrapi-peer) against
// the gdrcopy tree in $P2PKIT_GDRCOPY_SRC and runs apiperf --copies beside it:
// the peer names libgdrapi and its copy routines, answers every size in both
// directions (it compares each copy with its source, so an answer is a copy
// that kept every byte), and refuses what is not a request. No gdrcopy source
// comes with this repository, so without one the test is skipped, and it fails
// under P2PKIT_REQUIRE_HW=1.
func TestGdrapiPeer(t *testing.T) {
	src := os.Getenv(gdrcopySrcEnv)
	if src == "" {
		msg := "set " + gdrcopySrcEnv + " to a gdrcopy source tree (git clone -b v2.6 https://github.com/NVIDIA/gdrcopy) to build and run the libgdrapi peer"
		if os.Getenv("P2PKIT_REQUIRE_HW") == "1" {
			t.Fatal("P2PKIT_REQUIRE_HW=1 but " + msg)
		}
		t.Skip(msg)
	}
	peer := filepath.Join(t.TempDir(), "gdrapi-peer")
	build := exec.Command("bash", "../../scripts/build-gdrapi-peer.sh", src, peer)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build-gdrapi-peer.sh: %v\n%s", err, out)
	}

	code, stdout, stderr := runCLI(t, "--format", "json", "apiperf", "--copies", "-s", "65536", "--rounds", "3", "--peer", peer)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var rep copiesReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Copies == nil || !strings.HasPrefix(rep.Copies.Peer, "libgdrapi ") || !strings.Contains(rep.Copies.Peer, "gdr_copy_to_mapping/gdr_copy_from_mapping (store ") {
		t.Errorf("peer = %+v, want libgdrapi's copies and the routines it chose", rep.Copies)
	}
	rows := map[string]bool{}
	for _, r := range rep.Results {
		if r.PeerNS == nil || *r.PeerNS <= 0 || r.Ratio == nil {
			t.Errorf("%s %d: no time from the peer: %+v", r.Direction, r.Size, r)
		}
		rows[r.Direction] = true
	}
	if len(rep.Results) != 2*17 || !rows["to_device"] || !rows["from_device"] {
		t.Errorf("%d rows (%v), want both directions of the 17 sizes from 1 B to 64 KiB", len(rep.Results), rows)
	}

	cmd := exec.Command(peer)
	cmd.Stdin = strings.NewReader("to 0 1\nsideways 8 1\nfrom 8\nto 8 1 extra\nfrom 24 3\nquit\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("peer: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 6 {
		t.Fatalf("peer said %q, want a greeting and 5 answers", lines)
	}
	for i, l := range lines[1:5] {
		if !strings.HasPrefix(l, "error ") {
			t.Errorf("answer %d = %q, want an error", i+1, l)
		}
	}
	if strings.HasPrefix(lines[5], "error") {
		t.Errorf("answer to a good request = %q, want a time", lines[5])
	}
	checkPeerCPU(t, peer)
}

// checkPeerCPU checks that the peer runs on the CPU cpuEnv names, as its
// greeting says, and refuses a cpuEnv that names no CPU it may run on.
func checkPeerCPU(t *testing.T, peer string) {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Skip(err)
	}
	cpu := cpus[len(cpus)-1]
	cmd := exec.Command(peer)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", cpuEnv, cpu))
	cmd.Stdin = strings.NewReader("quit\n")
	out, err := cmd.Output()
	if want := fmt.Sprintf(" on CPU %d\n", cpu); err != nil || !strings.HasSuffix(string(out), want) {
		t.Errorf("peer with %s=%d: %v, greeting %q; want it to end %q", cpuEnv, cpu, err, out, want)
	}
	for _, bad := range []string{"x", "-1", " 1", "1048576"} {
		cmd := exec.Command(peer)
		cmd.Env = append(os.Environ(), cpuEnv+"="+bad)
		cmd.Stdin = strings.NewReader("quit\n")
		out, err := cmd.Output()
		if err == nil || len(out) != 0 {
			t.Errorf("peer with %s=%q: %v, output %q; want a failure before the greeting", cpuEnv, bad, err, out)
		}
	}
}
