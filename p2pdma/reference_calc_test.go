package p2pdma

import (
	"github.com/p2pkit/p2pkit/pcie"

	"github.com/p2pkit/p2pkit/kversion"
)

// referenceCalc is a direct, readable port of calc_map_type_and_dist() in
// drivers/pci/p2pdma.c (Linux 6.12; the same from 5.9 on), kept beside the tuned
// [Calculator] so that the two can be read side by side and tested against each
// other on random trees. It has the kernel's loop shape: the outer loop walks the
// provider up with pci_upstream_bridge(), checking ACS on each function it visits,
// and the inner loop walks the client up looking for that function.
//
// It models only what the kernel reads, with every fact known: ok is false when a
// fact it needs was not read (ACS Control or a port type without root), or when the
// kernel version is older than the rules modelled here (5.9); the Calculator then
// says Unknown and why. The verdict carries no reason and no fix.
func referenceCalc(plat Platform, provider, client *pcie.Device) (mapType MapType, dist int, ok bool) {
	if k := plat.Kernel; !k.IsZero() && k.Compare(kernelCPURule) < 0 {
		return Unknown, 0, false
	}
	// enum pci_p2pdma_map_type map_type = PCI_P2PDMA_MAP_THRU_HOST_BRIDGE;
	mapType = ThruHostBridge
	a, b := provider, client
	acsRedirects := false
	acsCnt, acsUnread := 0, 0
	distA, distB := 0, 0
	steps := 0

	// while (a) { dist_b = 0; if (pci_bridge_has_acs_redir(a)) acs_cnt++; ...
	for a != nil {
		distB = 0
		acsCnt, acsUnread = refCountACSRedir(a, acsCnt, acsUnread)
		// bb = b; while (bb) { if (a == bb) goto check_b_path_acs; ... }
		for bb := b; bb != nil; bb = bb.Upstream() {
			if a == bb {
				return refCheckBPath(plat, provider, client, a, b, distA+distB, acsCnt, acsUnread)
			}
			distB++
			if steps++; steps > maxChain*maxChain {
				return Unknown, 0, false // a loop in the tree
			}
		}
		a = a.Upstream()
		distA++
		if distA > maxChain {
			return Unknown, 0, false
		}
	}
	// *dist = dist_a + dist_b; goto map_through_host_bridge;
	// ACS hits counted on the way are not used: acs_redirects stays false.
	dist = distA + distB
	return refThroughHostBridge(plat, provider, client, mapType, acsRedirects, dist)
}

// refCheckBPath is the check_b_path_acs label: the client's chain below the common
// upstream bridge a is checked for ACS redirect too, then the pair is bus-addr when
// no function had it set.
func refCheckBPath(plat Platform, provider, client, a, b *pcie.Device, dist, acsCnt, acsUnread int) (MapType, int, bool) {
	// bb = b; while (bb) { if (a == bb) break; if (pci_bridge_has_acs_redir(bb)) acs_cnt++; ... }
	for bb := b; bb != nil && bb != a; bb = bb.Upstream() {
		acsCnt, acsUnread = refCountACSRedir(bb, acsCnt, acsUnread)
	}
	// if (!acs_cnt) { map_type = PCI_P2PDMA_MAP_BUS_ADDR; goto done; }
	switch {
	case acsCnt == 0 && acsUnread > 0:
		return Unknown, 0, false // an unread ACS Control decides between the two
	case acsCnt == 0:
		return BusAddr, dist, true
	}
	// acs_redirects = true; fall through to map_through_host_bridge.
	return refThroughHostBridge(plat, provider, client, ThruHostBridge, true, dist)
}

// refThroughHostBridge is the map_through_host_bridge label:
//
//	if (!cpu_supports_p2pdma() && !host_bridge_whitelist(provider, client, acs_redirects))
//		map_type = PCI_P2PDMA_MAP_NOT_SUPPORTED;
//
// acs_redirects is only the warn argument of host_bridge_whitelist(): it changes
// what is logged, not the answer.
func refThroughHostBridge(plat Platform, provider, client *pcie.Device, mapType MapType, _ bool, dist int) (MapType, int, bool) {
	if provider.HostBridge == nil || client.HostBridge == nil {
		return Unknown, 0, false // the tree read is incomplete; the kernel always has one
	}
	if plat.cpuSupportsP2PDMA() {
		return mapType, dist, true
	}
	allowed, known := refHostBridgeWhitelist(plat.Kernel, provider, client)
	if !known {
		return Unknown, 0, false
	}
	if !allowed {
		mapType = NotSupported
	}
	return mapType, dist, true
}

// refCountACSRedir is "if (pci_bridge_has_acs_redir(d)) acs_cnt++" of
// drivers/pci/p2pdma.c (RR, CR or EC set in ACS Control), counting the functions
// whose ACS Control was not read apart.
func refCountACSRedir(d *pcie.Device, acsCnt, acsUnread int) (int, int) {
	switch acsRedirState(d) {
	case yes:
		acsCnt++
	case maybe:
		acsUnread++
	}
	return acsCnt, acsUnread
}

// refHostBridgeWhitelist is host_bridge_whitelist() in drivers/pci/p2pdma.c:
// both functions below one host bridge need that bridge whitelisted; below two,
// both bridges whitelisted without REQ_SAME_HOST_BRIDGE.
func refHostBridgeWhitelist(k kversion.Version, a, b *pcie.Device) (allowed, known bool) {
	hostA, hostB := a.HostBridge, b.HostBridge
	if hostA == nil || hostB == nil {
		return false, false
	}
	if hostA == hostB {
		return refHostBridgeWhitelisted(k, hostA, true)
	}
	okA, knownA := refHostBridgeWhitelisted(k, hostA, false)
	okB, knownB := refHostBridgeWhitelisted(k, hostB, false)
	switch {
	case knownA && !okA, knownB && !okB:
		return false, true
	case !knownA || !knownB:
		return false, false
	}
	return true, true
}

// refHostBridgeWhitelisted is __host_bridge_whitelist() with pci_host_bridge_dev()
// in drivers/pci/p2pdma.c: the first function on the root bus, if it is devfn 00.0
// or a Root Port, must match an entry of pci_p2pdma_whitelist[] of kernel k, and an
// entry flagged REQ_SAME_HOST_BRIDGE only allows traffic within its host bridge.
func refHostBridgeWhitelisted(k kversion.Version, h *pcie.HostBridge, sameHostBridge bool) (allowed, known bool) {
	// root = list_first_entry_or_null(&host->bus->devices, ...)
	root := h.FirstDevice()
	if root == nil {
		return false, true
	}
	if root.Address.DevFn() != 0 {
		pt, ok := root.PortType()
		if !ok && (root.Config == nil || !root.Config.CapsKnown) {
			return false, false
		}
		if pt != pcie.PortRootPort {
			return false, true
		}
	}
	// for (entry = pci_p2pdma_whitelist; entry->vendor; entry++)
	for _, entry := range whitelist {
		if !entry.matches(root.Vendor, root.Device) {
			continue
		}
		presence := entry.presence(k)
		switch {
		case presence == no:
			continue
		case entry.SameHostBridge && !sameHostBridge:
			return false, true // if (entry->flags & REQ_SAME_HOST_BRIDGE && !same_host_bridge)
		case presence == maybe:
			return false, false // the kernel k may or may not have the entry
		}
		return true, true
	}
	return false, true
}
