package vmtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
	"github.com/p2pkit/p2pkit/sysfs"
)

// virtDoc is the part of `p2pcheck fix --virt-host --format json` checked here.
type virtDoc struct {
	Use    string `json:"use"`
	Result string `json:"result"`
	Pairs  []struct {
		Provider, Client string
		Before           fixVerdict `json:"before"`
		Predicted        fixVerdict `json:"predicted"`
	} `json:"pairs"`
	Actions []struct {
		Address string `json:"address"`
	} `json:"actions"`
	Persistent struct {
		Form string `json:"form"`
	} `json:"persistent"`
	Notes []string `json:"notes"`
}

// checkVirtHost judges the virtualization-host plan by the kernel. On the root
// ports, the kernel's isolation (SV, RR, CR, UF) is what the plan wants; on the
// test kernel the NIC's root port also carries Direct Translated P2P from the
// pci=config_acs= the entry booted with (ACS read back: checkFacts), which the plan
// keeps. So the dry run and --apply have nothing to do; every pair's verdict, before
// and predicted, equals the kernel's own (the oracle: redirect is kept, so a pair
// through the root complex stays not-supported); the NIC and its peer below the root
// ports are in IOMMU groups of their own, and so are the two below QEMU's switch,
// whose ports have no ACS: the kernel groups them by the isolated path above the
// switch (pci_device_group()), though they reach each other directly, which the
// plan says; and the NICs show the ATS capability.
func checkVirtHost(t *testing.T, topo *Topology, k Kernel, v View, oracle *Oracle, get fixCapture) {
	vh := topo.VirtHost
	addr := func(n *Node) pcie.Address { a, _ := topo.Address(n); return a }
	nic, peer, swNIC, swPeer := addr(vh.NIC), addr(vh.Peer), addr(vh.SwitchNIC), addr(vh.SwitchPeer)
	for _, name := range []string{"virt-fix.json", "virt-apply.json"} {
		b, ok := get(name)
		if !ok {
			t.Fatalf("%s failed or is missing", name)
		}
		var d virtDoc
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, tail(b, 2000))
		}
		if d.Use != "virt-host" || d.Result != "nothing-to-do" || len(d.Actions) != 0 {
			t.Errorf("%s: use %s, result %s, actions %+v; want virt-host, nothing-to-do", name, d.Use, d.Result, d.Actions)
		}
		for _, want := range []string{"has no ACS Direct Translated P2P", "has no ACS capability: the functions below it reach"} {
			if !slicesContainsPrefix(d.Notes, want) {
				t.Errorf("%s: no note %q on the switch ports without ACS: %q", name, want, d.Notes)
			}
		}
		if oracle == nil {
			continue
		}
		for _, p := range d.Pairs {
			pa, _ := pcie.ParseAddress(p.Provider)
			ca, _ := pcie.ParseAddress(p.Client)
			want := verdictOf(*oracle, pa, ca)
			for what, got := range map[string]fixVerdict{"before": p.Before, "predicted": p.Predicted} {
				if g := got.MapType + " " + itoa(got.Distance); g != want {
					t.Errorf("%s: %s -> %s %s %q, the kernel %q", name, p.Provider, p.Client, what, g, want)
				}
			}
		}
	}
	g := func(a pcie.Address) int { return v.Facts[a].IOMMUGroup }
	if g(nic) == g(peer) || g(nic) < 0 {
		t.Errorf("NIC %s and peer %s below root ports: groups %d and %d, want two", nic, peer, g(nic), g(peer))
	}
	if g(swNIC) == g(swPeer) || g(swNIC) < 0 {
		t.Errorf("NIC %s and peer %s below a switch without ACS: groups %d and %d, want two (the kernel's rule)", swNIC, swPeer, g(swNIC), g(swPeer))
	}
	b, ok := get("snapshot.tar.gz")
	if !ok {
		t.Fatal("snapshot missing")
	}
	root, err := snapshot.Read(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := sysfs.New(root).PCIRecords()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Address != nic && r.Address != swNIC {
			continue
		}
		c, err := pcie.ParseConfig(r.Config)
		if err != nil || c.ATSCap == nil {
			t.Errorf("%s: no ATS capability (ats=on): %v", r.Address, err)
		}
	}
}

func slicesContainsPrefix(s []string, sub string) bool {
	for _, x := range s {
		if strings.Contains(x, sub) {
			return true
		}
	}
	return false
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
