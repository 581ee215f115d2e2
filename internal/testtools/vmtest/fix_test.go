package vmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pkit/p2pkit/pcie"
)

// fixDoc is the part of `p2pcheck fix --format json` (schema/fix.v1.json) checked here.
type fixDoc struct {
	Result   string `json:"result"`
	ExitCode int    `json:"exit_code"`
	Pairs    []struct {
		Provider, Client string
		Before           fixVerdict `json:"before"`
		Predicted        fixVerdict `json:"predicted"`
		After            *fixVerdict
		AsPredicted      *bool `json:"as_predicted"`
	} `json:"pairs"`
	Actions []struct {
		Address  string `json:"address"`
		ReadBack string `json:"read_back"`
		Planned  string `json:"planned"`
		Error    string `json:"error"`
	} `json:"actions"`
}

type fixVerdict struct {
	MapType  string `json:"map_type"`
	Distance int    `json:"distance"`
}

func parseFix(t *testing.T, name string, b []byte) fixDoc {
	t.Helper()
	var d fixDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, tail(b, 2000))
	}
	return d
}

// fixCapture is one capture as the guest printed it (or as it was kept): its
// bytes, and whether it was there with exit status 0.
type fixCapture func(name string) ([]byte, bool)

// checkFix judges the provisioning steps by the kernel: boot is the oracle's report
// at boot, rerun the one it printed afresh after `fix --apply` (ParseOracleRerun).
//
//  1. `pairs --all --assume acs-redirect=off` equals the kernel's fresh verdict for
//     every ordered pair;
//  2. `fix` (dry run) changed no config file byte;
//  3. `fix --apply` fixed what it planned, every pair as predicted, and the kernel's
//     fresh verdicts equal both p2pcheck's pairs read again and fix's predictions;
//     the CMB provider and its peer were refused (Intel) or sent through the host
//     bridge (EPYC) at boot and are bus-addr now;
//  4. (the p2pmem proof, checked beside this, ran after the fix);
//  5. a second `fix --apply` found nothing to do.
func checkFix(t *testing.T, topo *Topology, v View, boot, rerun Oracle, get fixCapture) {
	t.Run("assume", func(t *testing.T) {
		b, ok := get("assume.json")
		if !ok {
			t.Fatal("pairs --assume failed or is missing")
		}
		checkPairs(t, rerun, v, b)
	})
	t.Run("dry-run", func(t *testing.T) { checkFixDryRun(t, get) })
	t.Run("apply", func(t *testing.T) { checkFixApplied(t, topo, v, boot, rerun, get) })
	t.Run("again", func(t *testing.T) {
		b, ok := get("fix-again.json")
		if !ok {
			t.Fatal("the second fix --apply failed (exit status not 0) or is missing")
		}
		if d := parseFix(t, "fix-again.json", b); d.Result != "nothing-to-do" || len(d.Actions) != 0 || d.ExitCode != 0 {
			t.Errorf("second fix --apply: result %s, %d actions, exit %d", d.Result, len(d.Actions), d.ExitCode)
		}
	})
}

// checkFixDryRun: the dry run planned one action and changed no config byte.
func checkFixDryRun(t *testing.T, get fixCapture) {
	b, ok := get("fix-dry.json")
	if !ok {
		t.Fatal("fix (dry run) failed or is missing")
	}
	if d := parseFix(t, "fix-dry.json", b); d.Result != "planned" || len(d.Actions) != 1 {
		t.Errorf("dry run: result %s, %d actions, want planned, 1", d.Result, len(d.Actions))
	}
	before, ok1 := get("config-before.txt")
	after, ok2 := get("config-after-dry.txt")
	switch {
	case !ok1 || !ok2:
		t.Error("config checksums missing")
	case !bytes.Equal(before, after):
		t.Errorf("the dry run changed config space:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// checkFixApplied: fix --apply fixed the root port, every pair as predicted and
// as the kernel now says, and the CMB provider's pair is bus-addr now.
func checkFixApplied(t *testing.T, topo *Topology, v View, boot, rerun Oracle, get fixCapture) {
	b, ok := get("fix-apply.json")
	if !ok {
		t.Fatal("fix --apply failed or is missing")
	}
	d := parseFix(t, "fix-apply.json", b)
	rp, _ := topo.Address(topo.Root[0])
	if d.Result != "fixed" || len(d.Actions) != 1 || d.Actions[0].Address != rp.String() ||
		d.Actions[0].ReadBack != d.Actions[0].Planned || d.Actions[0].Error != "" {
		t.Errorf("fix --apply: result %s, actions %+v; want fixed, the root port %s", d.Result, d.Actions, rp)
	}
	fresh := map[string]Verdict{}
	for _, x := range rerun.Verdicts {
		fresh[x.Provider.String()+" "+x.Client.String()] = x
	}
	for _, p := range d.Pairs {
		k := fresh[p.Provider+" "+p.Client]
		if p.After == nil || p.AsPredicted == nil || !*p.AsPredicted {
			t.Errorf("%s -> %s: after %+v, predicted %+v", p.Provider, p.Client, p.After, p.Predicted)
		}
		if k.MapType != p.Predicted.MapType || k.Distance != p.Predicted.Distance {
			t.Errorf("%s -> %s: predicted %s %d, the kernel now %s %d", p.Provider, p.Client,
				p.Predicted.MapType, p.Predicted.Distance, k.MapType, k.Distance)
		}
	}
	checkFixAfter(t, topo, v, boot, rerun, get)
}

// checkFixAfter: pairs read again after the fix equal the kernel's fresh
// verdicts, and the kernel moved the CMB provider's pair to bus-addr.
func checkFixAfter(t *testing.T, topo *Topology, v View, boot, rerun Oracle, get fixCapture) {
	after, ok := get("pairs-after.json")
	if !ok {
		t.Fatal("pairs after the fix failed or is missing")
	}
	checkPairs(t, rerun, v, after)
	prov, _ := topo.Address(topo.P2PMem.Provider)
	target, _ := topo.Address(topo.P2PMem.Target)
	was := "not-supported"
	if topo.CPUP2P {
		was = "thru-host-bridge"
	}
	for _, c := range []struct {
		o    Oracle
		want string
	}{{boot, was}, {rerun, "bus-addr"}} {
		if got := verdictOf(c.o, prov, target); got != c.want+" 2" {
			t.Errorf("kernel: %s -> %s is %q, want %q", prov, target, got, c.want+" 2")
		}
	}
}

// verdictOf returns the oracle's "map-type distance" for one pair, "" if absent.
func verdictOf(o Oracle, p, c pcie.Address) string {
	for _, v := range o.Verdicts {
		if v.Provider == p && v.Client == c {
			return fmt.Sprintf("%s %d", v.MapType, v.Distance)
		}
	}
	return ""
}

// checkPersisted judges an entry booted with the parameter `fix --persist` writes:
// `p2pcheck fix` finds nothing to do, and on the test kernel the CMB provider and its
// peer are bus-addr from boot on (boot is nil on other kernels).
func checkPersisted(t *testing.T, topo *Topology, boot *Oracle, get fixCapture) {
	b, ok := get("fix-persisted.json")
	if !ok {
		t.Fatal("fix on the persisted boot failed or is missing")
	}
	if d := parseFix(t, "fix-persisted.json", b); d.Result != "nothing-to-do" || len(d.Actions) != 0 {
		t.Errorf("fix: result %s, %d actions, want nothing-to-do", d.Result, len(d.Actions))
	}
	if boot == nil {
		return
	}
	prov, _ := topo.Address(topo.P2PMem.Provider)
	target, _ := topo.Address(topo.P2PMem.Target)
	if got := verdictOf(*boot, prov, target); got != "bus-addr 2" {
		t.Errorf("kernel at boot: %s -> %s is %q, want bus-addr 2", prov, target, got)
	}
}

// TestPersistedParamIsFixs: the parameter fix-cmb-config-acs boots with is the one
// `p2pcheck fix` planned on fix-cmb on the test kernel, as kept.
func TestPersistedParamIsFixs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(keptDir, "fix-cmb-oracle", "fix-dry.json"))
	if err != nil {
		t.Skipf("no kept fix-cmb capture: %v", err)
	}
	var d struct {
		Persistent struct {
			KernelParam string `json:"kernel_param"`
		} `json:"persistent"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.Persistent.KernelParam != configACSParam {
		t.Errorf("fix planned %q for fix-cmb, fix-cmb-config-acs boots with %q", d.Persistent.KernelParam, configACSParam)
	}
}
