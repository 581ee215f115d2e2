//go:build vmtest

package vmtest

import "strings"

// virtCaptures are the captures of an entry with VirtHost: the virtualization-host
// plan for the pairs among its four functions (dry run), then --apply, which must
// find the kernel's isolation already in place.
func (t *Topology) virtCaptures() []Capture {
	var names []string
	for _, n := range []*Node{t.VirtHost.NIC, t.VirtHost.Peer, t.VirtHost.SwitchNIC, t.VirtHost.SwitchPeer} {
		a, _ := t.Address(n)
		names = append(names, a.String())
	}
	pairs := strings.Join(names, ",")
	return []Capture{
		{Name: "virt-fix.json", Shell: "p2pcheck fix --virt-host --pairs " + pairs + " --format json"},
		{Name: "virt-apply.json", Shell: "p2pcheck fix --virt-host --apply --pairs " + pairs + " --format json"},
	}
}
