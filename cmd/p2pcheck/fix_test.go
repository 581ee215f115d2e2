package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/provision"
)

// fixSchema compiles schema/fix.v1.json.
func fixSchema(t *testing.T) func([]byte) error { return compileSchema(t, "fix.v1.json") }

// compileSchema compiles schema/<name> into a validator.
func compileSchema(t *testing.T, name string) func([]byte) error {
	t.Helper()
	return testsupport.Schema(t, "../../schema/"+name)
}

func decodeFix(t *testing.T, out string) provision.Report {
	t.Helper()
	var r provision.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return r
}

// TestFixCommand runs fix on a writable DGX-like tree: the dry run changes nothing,
// --apply performs the plan and finds every pair as predicted, a second --apply has
// nothing to do; every JSON document matches the schema.
func TestFixCommand(t *testing.T) {
	validate := fixSchema(t)
	root := machineRoot(t, "dgx-h100")
	args := []string{"--root", root, "--no-nvml", "fix", "--format", "json"}

	code, out, errOut := p2pcheck(args...)
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	if err := validate([]byte(out)); err != nil {
		t.Errorf("dry run does not match schema/fix.v1.json: %v", err)
	}
	dry := decodeFix(t, out)
	if dry.Mode != "dry-run" || dry.Result != provision.ResultPlanned || len(dry.Actions) != 26 {
		t.Fatalf("dry run: %s %s, %d actions", dry.Mode, dry.Result, len(dry.Actions))
	}
	if code, out2, _ := p2pcheck(args...); code != 0 || out2 != out {
		t.Errorf("a second dry run differs (the first changed something?)")
	}
	code, out2, errOut := p2pcheck(append(args, "--persist")...)
	if p := decodeFix(t, out2); code != 0 || !p.Persistent.Written || p.Persistent.KernelParam != dry.Persistent.KernelParam {
		t.Fatalf("--persist: exit %d, %+v: %s", code, p.Persistent, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(root, provision.DropInPath)); err != nil || string(b) != dry.Persistent.DropIn {
		t.Errorf("--persist wrote %q (%v), want the planned drop-in", b, err)
	}

	checkFixApply(t, args, dry, validate)

	code, out, errOut = p2pcheck(append(args, "--apply")...)
	if code != 0 {
		t.Fatalf("second apply: exit %d: %s", code, errOut)
	}
	if again := decodeFix(t, out); again.Result != provision.ResultNothingToDo || len(again.Actions) != 0 {
		t.Errorf("second apply: %s, %d actions", again.Result, len(again.Actions))
	}
	if err := validate([]byte(out)); err != nil {
		t.Errorf("second apply does not match schema/fix.v1.json: %v", err)
	}
}

// checkFixApply runs fix --apply with args: it performs the plan of the dry run
// dry, every pair ends as predicted and every action reads back as planned.
func checkFixApply(t *testing.T, args []string, dry provision.Report, validate func([]byte) error) {
	t.Helper()
	code, out, errOut := p2pcheck(append(args, "--apply")...)
	if code != 0 {
		t.Fatalf("apply: exit %d: %s\n%s", code, errOut, out)
	}
	if err := validate([]byte(out)); err != nil {
		t.Errorf("apply does not match schema/fix.v1.json: %v", err)
	}
	applied := decodeFix(t, out)
	if applied.Result != provision.ResultFixed {
		t.Errorf("apply: %s", applied.Result)
	}
	checkAppliedPairs(t, applied, dry)
}

// checkAppliedPairs: each pair of applied ends as predicted, with the dry run's
// prediction, and each action was written and read back as planned.
func checkAppliedPairs(t *testing.T, applied, dry provision.Report) {
	t.Helper()
	for i, p := range applied.Pairs {
		if p.After == nil || p.AsPredicted == nil || !*p.AsPredicted ||
			!cmp.Equal(*p.After, p.Predicted, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Reason" }, cmp.Ignore())) {
			t.Errorf("pair %d %s -> %s: after %+v, predicted %+v", i, p.Provider, p.Client, p.After, p.Predicted)
		}
		if cmp.Diff(p.Predicted, dry.Pairs[i].Predicted) != "" {
			t.Errorf("pair %d: the prediction of the dry run and of --apply differ", i)
		}
	}
	for _, a := range applied.Actions {
		if a.Written == nil || !*a.Written || a.ReadBack != a.Planned || a.Error != "" {
			t.Errorf("action %s: written %v, read back %s, planned %s, error %q", a.Address, a.Written, a.ReadBack, a.Planned, a.Error)
		}
	}
}

// TestFixNamesWhatPairNames: for pairs of interest, the functions fix --pairs plans
// to change are exactly those `pair` names in its fix.
func TestFixNamesWhatPairNames(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	for _, pr := range [][2]string{{"gpu0", "mlx5_0"}, {"gpu0", "gpu1"}, {"gpu0", "nvme0"}, {"gpu0", "gpu4"}} {
		code, out, errOut := p2pcheck("--root", root, "--no-nvml", "pair", pr[0], pr[1], "--format", "json")
		if code != 0 {
			t.Fatalf("pair %v: exit %d: %s", pr, code, errOut)
		}
		var pj struct {
			Verdict struct {
				Fix *struct {
					Setpci []string `json:"setpci"`
				} `json:"fix"`
			} `json:"verdict"`
		}
		if err := json.Unmarshal([]byte(out), &pj); err != nil {
			t.Fatal(err)
		}
		var want []string
		if pj.Verdict.Fix != nil {
			for _, s := range pj.Verdict.Fix.Setpci {
				want = append(want, strings.Fields(s)[2]) // setpci -s BDF ...
			}
		}
		slices.Sort(want)
		code, out, errOut = p2pcheck("--root", root, "--no-nvml", "fix", "--pairs", pr[0]+","+pr[1], "--format", "json")
		if code != 0 {
			t.Fatalf("fix --pairs %v: exit %d: %s", pr, code, errOut)
		}
		var got []string
		for _, a := range decodeFix(t, out).Actions {
			got = append(got, a.Address.String())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%v: (-pair +fix):\n%s", pr, diff)
		}
	}
}

func TestFixRefusals(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 1000 }
	code, _, errOut := p2pcheck("fix", "--apply")
	if code != exitFail || !strings.Contains(errOut, "needs root") {
		t.Errorf("--apply without root: exit %d, %q", code, errOut)
	}
	snap := "../../testdata/vm/iommu-acs-oracle/snapshot.tar.gz"
	if code, _, errOut := p2pcheck("--snapshot", snap, "fix", "--apply"); code != exitUsage {
		t.Errorf("--apply on a snapshot: exit %d, %q", code, errOut)
	}
	if code, _, errOut := p2pcheck("--snapshot", snap, "fix", "--pairs", "0000:05:00.0"); code != exitUsage {
		t.Errorf("--pairs with one device: exit %d, %q", code, errOut)
	}
	if code, _, errOut := p2pcheck("--snapshot", snap, "fix", "--pairs", "0000:05:00.0,nvme9"); code != exitUsage {
		t.Errorf("--pairs naming nothing: exit %d, %q", code, errOut)
	}
}

// TestFixUnread: without root the plan cannot be made, exit 3.
func TestFixUnread(t *testing.T) {
	root := machineRoot(t, "dgx-h100-nonroot")
	code, out, _ := p2pcheck("--root", root, "--no-nvml", "fix", "--format", "json")
	if r := decodeFix(t, out); code != exitNoEval || r.Result != provision.ResultUnknown || len(r.Unknown) == 0 {
		t.Errorf("exit %d, result %s, %d unknowns", code, r.Result, len(r.Unknown))
	}
}

// TestFixSnapshotText: on the QEMU guest where the kernel set ACS redirect on the
// root ports, the dry run names the root port above the multifunction NVMe; the
// guest ran the 6.12.117 test kernel, which has the fixed pci=config_acs=, so that is
// the parameter, every bit given so that SV and UF stay set; with --kernel-version
// 6.6 it is pci=disable_acs_redir=, and 6.12.22, whose parser is broken, gets none.
func TestFixSnapshotText(t *testing.T) {
	code, out, errOut := p2pcheck("--snapshot", "../../testdata/vm/iommu-acs-oracle/snapshot.tar.gz", "fix", "--pairs", "0000:05:00.0,0000:05:00.1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"0000:05:00.0  0000:05:00.1  not-supported 2", "-> bus-addr 2",
		"1. 0000:00:03.0  ACS Control (0x14e) 0x001d -> 0x0011", "pci=config_acs=0010001@0000:00:03.0",
		"IOMMU groups after a reboot", "0000:00:03.0, 0000:05:00.0, 0000:05:00.1", "result: planned"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for kernel, want := range map[string]string{
		"6.6.63":  "pci=disable_acs_redir=0000:00:03.0",
		"6.12.22": "Persistent: no boot parameter keeps this plan (broken-kernel)",
	} {
		_, out, _ := p2pcheck("--snapshot", "../../testdata/vm/iommu-acs-oracle/snapshot.tar.gz", "--kernel-version", kernel,
			"fix", "--pairs", "0000:05:00.0,0000:05:00.1")
		if !strings.Contains(out, want) {
			t.Errorf("--kernel-version %s: output lacks %q:\n%s", kernel, want, out)
		}
	}
}

// TestPairsAssume: the what-if view of the same guest changes exactly the two pairs
// below the root port with redirect, and rejects an unknown assumption.
func TestPairsAssume(t *testing.T) {
	snap := "../../testdata/vm/iommu-acs-oracle/snapshot.tar.gz"
	code, out, errOut := p2pcheck("--snapshot", snap, "pairs", "--all", "--assume", "acs-redirect=off", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := compileSchema(t, "pairs-assume.v1.json")([]byte(out)); err != nil {
		t.Errorf("pairs --assume does not match schema/pairs-assume.v1.json: %v", err)
	}
	var doc struct {
		Assume []string `json:"assume"`
		Pairs  []struct {
			Provider, Client, MapType string
			Changed                   bool
		} `json:"pairs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, p := range doc.Pairs {
		if p.Changed {
			changed = append(changed, p.Provider+" "+p.Client)
		}
	}
	want := []string{"0000:05:00.0 0000:05:00.1", "0000:05:00.1 0000:05:00.0"}
	if diff := cmp.Diff(want, changed); diff != "" || !slices.Equal(doc.Assume, []string{"acs-redirect=off"}) {
		t.Errorf("changed pairs (-want +got):\n%s\nassume %q", diff, doc.Assume)
	}
	if code, _, _ := p2pcheck("--snapshot", snap, "pairs", "--assume", "cpu=arm"); code != exitUsage {
		t.Errorf("bad assumption: exit %d", code)
	}
	code, out, _ = p2pcheck("--snapshot", snap, "pairs", "--assume", "cpu=amd-zen")
	if code != 0 || !strings.Contains(out, "thru-host-bridge") || !strings.Contains(out, "pairs change (*)") {
		t.Errorf("cpu=amd-zen: exit %d\n%s", code, out)
	}
}

// TestFixText checks the text output of --apply on one pair, and the advice on a
// node that needs some.
func TestFixText(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	code, out, errOut := p2pcheck("--root", root, "--no-nvml", "fix", "--apply", "--pairs", "gpu0,mlx5_0")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{
		"p2pcheck fix --apply", "2 changed by the runtime actions",
		"0000:1a:00.0  0000:1b:00.0  thru-host-bridge 4   -> bus-addr 4",
		"1. 0000:19:00.0  ACS Control (0x14e) 0x001d -> 0x0011 (mask 0x002c)  done, read back 0x0011",
		"2. 0000:19:01.0", "IOMMU groups affected: 10, 11, 12, 13",
		"warning: the kernel caches a verdict", "result: fixed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = p2pcheck("--root", machineRoot(t, "amd-epyc"), "--no-nvml", "fix")
	for _, want := range []string{"Advice, never applied by p2pcheck:", "iommu_mode (unknown)", "add iommu=pt", "result: nothing-to-do"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("amd-epyc: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
}

// TestFixVirtHost: on the inline node whose ConnectX NICs have ATS, fix finds a
// virtualization host and plans Direct Translated P2P on the NICs' switch ports,
// isolation kept (0x001d -> 0x005d), no redirect cleared; the bare-metal plan is made
// only when --bare-metal asks for it; --virt-host on Data Direct is refused, and so
// is --virt-host with --bare-metal.
func TestFixVirtHost(t *testing.T) {
	root := machineRoot(t, "hgx-inline-ats")
	code, out, errOut := p2pcheck("--root", root, "--no-nvml", "fix", "--format", "json")
	r := decodeFix(t, out)
	if code != 0 || r.Use != "virt-host" || !strings.Contains(r.UseReason, "ATS") {
		t.Fatalf("exit %d, use %s (%s): %s", code, r.Use, r.UseReason, errOut)
	}
	var got []string
	for _, a := range r.Actions {
		got = append(got, a.Address.String()+" "+a.Control+"->"+a.Planned)
	}
	if want := []string{"0000:17:00.0 0x001d->0x005d", "0000:39:00.0 0x001d->0x005d"}; !slices.Equal(got, want) {
		t.Errorf("virtualization-host actions %q, want %q", got, want)
	}
	if r.Persistent.Form != "config_acs" || !strings.Contains(r.Persistent.KernelParam, "1011101@0000:15:01.0/0.0/0.0") {
		t.Errorf("persistent %s %q", r.Persistent.Form, r.Persistent.KernelParam)
	}
	_, out, _ = p2pcheck("--root", root, "--no-nvml", "fix", "--format", "json", "--bare-metal")
	b := decodeFix(t, out)
	cleared := slices.ContainsFunc(b.Actions, func(a provision.ReportAction) bool {
		return a.Address.String() == "0000:17:00.0" && a.Planned == "0x0011"
	})
	if b.Use != "bare-metal" || !cleared {
		t.Errorf("--bare-metal: use %s, actions %+v", b.Use, b.Actions)
	}
	if code, _, _ := p2pcheck("--root", machineRoot(t, "gb300-data-direct"), "--no-nvml", "fix", "--virt-host"); code != exitUsage {
		t.Errorf("--virt-host on Data Direct: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := p2pcheck("--root", root, "fix", "--virt-host", "--bare-metal"); code != exitUsage {
		t.Errorf("--virt-host --bare-metal: exit %d", code)
	}
}
