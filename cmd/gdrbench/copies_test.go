package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// fakePeerEnv makes the test binary a peer of apiperf --copies (see
// TestMain): its value picks how the peer behaves, and fakePeerLogEnv names
// a file that it appends every request to.
const (
	fakePeerEnv    = "GDRBENCH_FAKE_PEER"
	fakePeerLogEnv = "GDRBENCH_FAKE_PEER_LOG"
)

// runMainEnv makes the test binary gdrbench itself, run with its
// arguments: a peer command "gdrbench apiperf --copies --serve".
const runMainEnv = "GDRBENCH_RUN_MAIN"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakePeerEnv); mode != "" {
		os.Exit(fakePeer(mode))
	}
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// fakePeer speaks the peer protocol. Mode "ok" answers 10 ns a copy,
// "greeting" sends a wrong greeting, "error" refuses every request,
// "nonsense" answers what is not a number, "silent" never answers, "cpu"
// answers as "ok" does and names the CPU cpuEnv gave it in its greeting.
func fakePeer(mode string) int {
	switch mode {
	case "greeting":
		fmt.Println("hello")
		return 0
	case "silent":
		fmt.Println("gdrbench-peer 1 fake peer")
		time.Sleep(time.Minute)
		return 0
	}
	if mode == "cpu" {
		fmt.Printf("gdrbench-peer 1 fake peer %s=%q\n", cpuEnv, os.Getenv(cpuEnv))
	} else {
		fmt.Println("gdrbench-peer 1 fake peer")
	}
	var log *os.File
	if name := os.Getenv(fakePeerLogEnv); name != "" {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return 1
		}
		defer f.Close()
		log = f
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := sc.Text()
		if line == "quit" {
			return 0
		}
		if log != nil {
			fmt.Fprintln(log, line)
		}
		var dir string
		var size, iters int
		if _, err := fmt.Sscanf(line, "%s %d %d", &dir, &size, &iters); err != nil {
			fmt.Println("error bad request")
			continue
		}
		switch mode {
		case "error":
			fmt.Println("error no such copy")
		case "nonsense":
			fmt.Println("fast")
		default:
			fmt.Println(10 * iters)
		}
	}
	return 0
}

// copiesReport is the part of apiperf --copies' JSON the tests look at.
type copiesReport struct {
	Tool    string      `json:"tool"`
	Copies  *copiesInfo `json:"copies"`
	Results []copyRow   `json:"results"`
}

func TestCopies(t *testing.T) {
	logName := t.TempDir() + "/requests"
	t.Setenv(fakePeerEnv, "ok")
	t.Setenv(fakePeerLogEnv, logName)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 3
	code, stdout, stderr := runCLI(t, "--format", "json", "apiperf", "--copies", "-s", "64", "--rounds", fmt.Sprint(rounds), "--peer", self)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if err := validator(t)([]byte(stdout)); err != nil {
		t.Errorf("output does not match schema/gdrbench.v1.json: %v\n%s", err, stdout)
	}
	var rep copiesReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Tool != "apiperf" || rep.Copies == nil || rep.Copies.Peer != "fake peer" || rep.Copies.Rounds != rounds {
		t.Errorf("report header: tool %q, copies %+v", rep.Tool, rep.Copies)
	}
	// Both directions of 1, 2, 4, ... 64 bytes, each size to then from.
	var want []string
	for size := 1; size <= 64; size *= 2 {
		want = append(want, fmt.Sprintf("to_device %d", size), fmt.Sprintf("from_device %d", size))
	}
	var got []string
	for _, r := range rep.Results {
		key := fmt.Sprintf("%s %d", r.Direction, r.Size)
		got = append(got, key)
		if r.PeerNS == nil || *r.PeerNS != 10 || r.Ratio == nil || r.KernelRatio == nil {
			t.Errorf("%s: peer %v, ratios %v %v; want the fake's 10 ns and both ratios", key, r.PeerNS, r.Ratio, r.KernelRatio)
			continue
		}
		if r.Iters < 1 || r.P2PKitNS <= 0 || r.P2PKitMinNS > r.P2PKitNS || r.Ratio.Min > r.Ratio.Median || r.Ratio.Median > r.Ratio.Max {
			t.Errorf("%s: inconsistent row %+v", key, r)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	checkPeerLog(t, logName, rep.Results, rounds)
}

// checkPeerLog checks that the peer timed every case once a round, in the
// order of rows, with the number of copies gdrbench chose for it.
func checkPeerLog(t *testing.T, name string, rows []copyRow, rounds int) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for range rounds {
		for _, r := range rows {
			want = append(want, fmt.Sprintf("%s %d %d", strings.TrimSuffix(r.Direction, "_device"), r.Size, r.Iters))
		}
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(string(b)), "\n")); diff != "" {
		t.Errorf("peer requests (-want +got):\n%s", diff)
	}
}

// TestCopiesText checks the text output's header and one row per case,
// without a peer.
func TestCopiesText(t *testing.T) {
	code, stdout, stderr := runCLI(t, "apiperf", "--copies", "-s", "16", "--rounds", "1")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3+10 || !strings.HasPrefix(lines[0], "copies on write-back host memory") ||
		!strings.HasPrefix(lines[2], "Test") || strings.Contains(stdout, "peer") {
		t.Errorf("text output:\n%s", stdout)
	}
	for _, l := range lines[3:] {
		if f := strings.Fields(l); len(f) != 6 || (f[0] != "to_device" && f[0] != "from_device") {
			t.Errorf("row %q: want test, size and four times", l)
		}
	}
}

// TestCopiesPeerErrors checks that a peer that breaks the protocol fails
// the run (exit 1) with a message that says how, and is not waited on
// forever.
func TestCopiesPeerErrors(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	defer func(start, answer time.Duration) { peerStartWait, peerAnswerWait = start, answer }(peerStartWait, peerAnswerWait)
	peerStartWait, peerAnswerWait = 2*time.Second, 200*time.Millisecond
	for _, tt := range []struct{ mode, want string }{
		{"greeting", "not a gdrbench peer"},
		{"error", "no such copy"},
		{"nonsense", "not a positive number of nanoseconds"},
		{"silent", "no answer within"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			t.Setenv(fakePeerEnv, tt.mode)
			code, _, stderr := runCLI(t, "apiperf", "--copies", "-s", "8", "--rounds", "1", "--peer", self)
			if code != exitFail || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, exitFail, tt.want)
			}
		})
	}
	code, _, stderr := runCLI(t, "apiperf", "--copies", "-s", "8", "--peer", t.TempDir()+"/none")
	if code != exitFail || !strings.Contains(stderr, "peer") {
		t.Errorf("missing peer program: exit %d, stderr %q", code, stderr)
	}
}

// TestCopiesServe runs gdrbench as its own peer, through the protocol, as
// the A/A check in apiperf's help does.
func TestCopiesServe(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(runMainEnv, "1")
	code, stdout, stderr := runCLI(t, "--format", "json", "apiperf", "--copies", "-s", "16", "--rounds", "2",
		"--peer", self+" apiperf --copies --serve -s 16")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var rep copiesReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Copies == nil || !strings.HasPrefix(rep.Copies.Peer, "gdrbench ") || len(rep.Results) != 10 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Results {
		if r.PeerNS == nil || *r.PeerNS <= 0 {
			t.Errorf("%s %d: no peer time", r.Direction, r.Size)
		}
	}
}

// TestServeCopies checks --serve's answers to good and bad requests.
func TestServeCopies(t *testing.T) {
	var out strings.Builder
	o := &globalOptions{stdout: &out, stderr: &out}
	ao := &apiPerfOptions{size: 64}
	in := "to 8 10\nfrom 64 3\nsideways 8 1\nto 65 1\nfrom 8 0\nto 8\nquit\nto 8 1\n"
	if err := ao.serveCopies(o, strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 7 || !strings.HasPrefix(lines[0], peerGreeting+"gdrbench ") {
		t.Fatalf("answers:\n%s", out.String())
	}
	for i, l := range lines[1:] {
		isErr := strings.HasPrefix(l, "error ")
		if wantErr := i >= 2; isErr != wantErr {
			t.Errorf("answer %d to %q: %q", i, strings.Split(in, "\n")[i], l)
		}
	}
}

// TestHostBytes checks that the host buffer of every size begins where the
// peer protocol says, hostOffset bytes past a page boundary, and is n bytes
// with no capacity beyond.
func TestHostBytes(t *testing.T) {
	page := uintptr(os.Getpagesize())
	for _, n := range []int{1, 63, 4096, 1 << 20, 16<<20 + 8} {
		b := hostBytes(n)
		if len(b) != n || cap(b) != n {
			t.Errorf("hostBytes(%d): len %d cap %d, want %d", n, len(b), cap(b), n)
		}
		if got := uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (page - 1); got != hostOffset {
			t.Errorf("hostBytes(%d) begins %d bytes past a page boundary, want %d", n, got, hostOffset)
		}
	}
}

// TestCopiesCPU checks that --cpu is recorded in the report and handed to
// the peer in cpuEnv, and that without it the peer gets no cpuEnv, even
// one gdrbench itself was started with.
func TestCopiesCPU(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Skip(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakePeerEnv, "cpu")
	t.Setenv(cpuEnv, "12345") // not for the peer: only --cpu is
	cpu := cpus[len(cpus)-1]
	for _, tt := range []struct {
		args     []string
		cpu      *int
		peerSays string
	}{
		{[]string{"--cpu", fmt.Sprint(cpu)}, &cpu, fmt.Sprintf("fake peer %s=%q", cpuEnv, fmt.Sprint(cpu))},
		{nil, nil, fmt.Sprintf("fake peer %s=%q", cpuEnv, "")},
	} {
		args := append([]string{"--format", "json", "apiperf", "--copies", "-s", "8", "--rounds", "1", "--peer", self}, tt.args...)
		code, stdout, stderr := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d; stderr:\n%s", tt.args, code, stderr)
		}
		if err := validator(t)([]byte(stdout)); err != nil {
			t.Errorf("%v: output does not match schema/gdrbench.v1.json: %v\n%s", tt.args, err, stdout)
		}
		var rep copiesReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&copiesInfo{Memory: copiesMemory, Rounds: 1, BatchUS: us(copyBatch), Peer: tt.peerSays, CPU: tt.cpu}, rep.Copies); diff != "" {
			t.Errorf("%v: copies (-want +got):\n%s", tt.args, diff)
		}
	}
}

// TestServeCopiesCPU checks that --serve times on the CPU cpuEnv names and
// says so in its greeting, and refuses a cpuEnv that names no CPU it may
// run on.
func TestServeCopiesCPU(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Skip(err)
	}
	cpu := cpus[len(cpus)-1]
	t.Setenv(cpuEnv, fmt.Sprint(cpu))
	var out strings.Builder
	o := &globalOptions{stdout: &out, stderr: &out}
	ao := &apiPerfOptions{size: 8, cpu: -1}
	if err := ao.serveCopies(o, strings.NewReader("to 8 1\nquit\n")); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], fmt.Sprintf(" on CPU %d", cpu)) || strings.HasPrefix(lines[1], "error") {
		t.Errorf("answers:\n%s", out.String())
	}
	for _, bad := range []string{"x", "-1", "1048576"} {
		t.Setenv(cpuEnv, bad)
		out.Reset()
		err := ao.serveCopies(o, strings.NewReader("quit\n"))
		if err == nil || !strings.Contains(err.Error(), cpuEnv) || out.Len() != 0 {
			t.Errorf("%s=%s: err %v, output %q; want an error naming %s and no greeting", cpuEnv, bad, err, out.String(), cpuEnv)
		}
	}
}

func TestCPUList(t *testing.T) {
	for _, tt := range []struct {
		cpus []int
		want string
	}{
		{nil, ""},
		{[]int{3}, "3"},
		{[]int{0, 1}, "0-1"},
		{[]int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"},
	} {
		if got := cpuList(tt.cpus); got != tt.want {
			t.Errorf("cpuList(%v) = %q, want %q", tt.cpus, got, tt.want)
		}
	}
}
