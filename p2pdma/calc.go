package p2pdma

import (
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/p2pkit/p2pkit/pcie"
)

// acsRedirectMask is PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC, the ACS Control bits that
// pci_bridge_has_acs_redir() in drivers/pci/p2pdma.c tests.
const acsRedirectMask = pcie.ACSRequestRedirect | pcie.ACSCompletionRedirect | pcie.ACSEgressControl

// maxChain bounds the walk up the tree; a PCI hierarchy has at most 256 buses, so a
// longer chain means the topology has a loop.
const maxChain = 256

// Verdict is the kernel's P2PDMA decision for one ordered (provider, client) pair, as
// calc_map_type_and_dist() in drivers/pci/p2pdma.c makes it.
type Verdict struct {
	Provider pcie.Address `json:"provider"`
	Client   pcie.Address `json:"client"`
	MapType  MapType      `json:"map_type"`
	// Distance is the kernel's distance: the number of hops from each function up to
	// the common upstream bridge, added; with no common bridge, the lengths of both
	// chains added. It is defined whatever the map type.
	Distance int `json:"distance"`
	// ACSRedirect lists the functions with ACS redirect (RR, CR or EC) set in ACS
	// Control on the path between the two, in the kernel's order: the provider and its
	// bridges up to and including the common one, then the client and its bridges
	// below the common one. It is empty (never nil, so JSON shows []) when there is no
	// common bridge, since the kernel ignores ACS then.
	ACSRedirect []pcie.Address `json:"acs_redirect"`
	// Common is the common upstream bridge the kernel found, where the path turns
	// (the function itself for a self pair), or nil when the path crosses the root
	// complex. The kernel checks ACS on the provider and its bridges up to and including
	// Common, and on the client and its bridges below Common. Not part of the pairs
	// JSON.
	Common *pcie.Address `json:"-"`
	// Reason explains the verdict in the kernel's terms.
	Reason string `json:"reason"`
	// Fix is set when ACS redirect is what keeps the pair from bus-addr.
	Fix *Fix `json:"fix,omitempty"`
	// Unknowns lists facts that could not be read and that the verdict depends on (the
	// map type is then Unknown) or that leave the ACSRedirect list incomplete.
	Unknowns []UnknownFact `json:"unknowns,omitempty"`
}

// noRedirect is the ACSRedirect of verdicts without redirection: empty, not nil.
var noRedirect = []pcie.Address{}

// devInfo is what the Calculator precomputes for one function.
type devInfo struct {
	addr  pcie.Address
	bdf   string
	chain []int32 // the function, then pci_upstream_bridge() applied repeatedly
	loop  bool    // the chain did not end within maxChain
	redir tri     // pci_bridge_has_acs_redir(): no, yes, maybe (ACS not read)
	hb    int32   // host bridge index, -1 when unknown

	busReason  string // reason when this function is the common bridge of a bus-addr pair
	acsNotRead string // reason of an Unknown verdict that hinges on this function's ACS
}

// hostInfo is the precomputed whitelist state of one host bridge
// (__host_bridge_whitelist() in drivers/pci/p2pdma.c).
type hostInfo struct {
	name    string
	state   tri // the root-bus device matches an entry: yes, no, maybe
	entry   *WhitelistEntry
	text    string      // explanation of state
	unknown UnknownFact // what is unknown when state is maybe
}

// hostOutcome is the result of the host-bridge case for one pair of host bridges.
type hostOutcome struct {
	mapType MapType
	text    string      // how the kernel decided, a clause for Verdict.Reason
	unknown UnknownFact // set when mapType is Unknown
}

// Calculator computes verdicts for many pairs of one topology. NewCalculator does the
// per-function and per-host-bridge work once; Calc then allocates nothing for the
// common verdicts. A Calculator is safe for concurrent use.
//
// Verdicts of one Calculator share their ACSRedirect slices and Fix values with other
// verdicts that have the same redirecting functions: treat them as read-only.
type Calculator struct {
	plat  Platform
	index map[*pcie.Device]int32
	devs  []devInfo
	hosts []hostInfo
	// noCommon[i*len(hosts)+j] is the outcome for a provider below host bridge i and
	// a client below j with no common upstream bridge (the kernel's warn=false case).
	noCommon []hostOutcome
	// noHost is the outcome when a host bridge is not known.
	noHost hostOutcome

	mu        sync.RWMutex
	redirects map[redirectKey]*redirectEntry
}

// Calc returns the verdict for one pair. It builds a Calculator over t each time; use
// NewCalculator for more than a few pairs. Functions missing from t.Devices are added.
func Calc(t *pcie.Topology, plat Platform, provider, client *pcie.Device) Verdict {
	return newCalculator(t, plat, provider, client).Calc(provider, client)
}

// NewCalculator precomputes, for every function of t, its upstream chain, its ACS
// redirect state and its host bridge, and for every host bridge its whitelist state.
func NewCalculator(t *pcie.Topology, plat Platform) *Calculator {
	return newCalculator(t, plat)
}

func newCalculator(t *pcie.Topology, plat Platform, extra ...*pcie.Device) *Calculator {
	c := &Calculator{plat: plat, index: make(map[*pcie.Device]int32),
		redirects: make(map[redirectKey]*redirectEntry)}
	hostIndex := make(map[*pcie.HostBridge]int32)
	var hostList []*pcie.HostBridge
	addHost := func(h *pcie.HostBridge) int32 {
		if h == nil {
			return -1
		}
		if i, ok := hostIndex[h]; ok {
			return i
		}
		i := int32(len(hostList))
		hostIndex[h] = i
		hostList = append(hostList, h)
		return i
	}
	var order []*pcie.Device
	add := func(d *pcie.Device) int32 {
		if i, ok := c.index[d]; ok {
			return i
		}
		i := int32(len(order))
		c.index[d] = i
		order = append(order, d)
		return i
	}
	if t != nil {
		for _, h := range t.HostBridges {
			addHost(h)
		}
		for _, d := range t.Devices {
			add(d)
		}
	}
	for _, d := range extra {
		if d != nil {
			add(d)
		}
	}
	// order grows while chains are built: an upstream bridge missing from
	// t.Devices is indexed too.
	for i := 0; i < len(order); i++ {
		d := order[i]
		info := devInfo{addr: d.Address, bdf: d.Address.String(), hb: addHost(d.HostBridge)}
		for x := d; x != nil; x = x.Upstream() {
			if len(info.chain) == maxChain {
				info.loop = true
				break
			}
			info.chain = append(info.chain, add(x))
		}
		info.redir = acsRedirState(d)
		c.devs = append(c.devs, info)
	}
	for i := range c.devs {
		c.devs[i].describe()
	}
	for _, h := range hostList {
		c.hosts = append(c.hosts, c.hostState(h))
	}
	n := len(c.hosts)
	c.noCommon = make([]hostOutcome, n*n)
	for i := range n {
		for j := range n {
			c.noCommon[i*n+j] = c.hostCase(int32(i), int32(j), "client and provider do not share an upstream bridge")
		}
	}
	c.noHost = hostOutcome{mapType: Unknown, text: "the host bridge of the provider or the client is not known",
		unknown: UnknownFact{Kind: HostBridgeUnknown}}
	return c
}

// acsRedirState mirrors pci_bridge_has_acs_redir() in drivers/pci/p2pdma.c: true
// when the function has an ACS capability and any of RR, CR, EC is set in its ACS
// Control register. The capability register, the egress vector and device-specific
// ACS quirks play no part.
//
// A config file of exactly 256 bytes, read with the privilege to read it all, means
// the kernel's cfg_size is 256 (no extended configuration space, e.g. a guest without
// MMCONFIG): pci_find_ext_capability() in drivers/pci/pci.c then finds nothing, so the
// kernel sees no ACS capability either.
func acsRedirState(d *pcie.Device) tri {
	acs, known := d.ACS()
	if !known && d.Config != nil && d.Config.CapsKnown && d.Config.Size == 256 {
		return no
	}
	switch {
	case !known:
		return maybe
	case acs != nil && acs.Control&acsRedirectMask != 0:
		return yes
	}
	return no
}

func (d *devInfo) describe() {
	d.busReason = fmt.Sprintf("client and provider share upstream bridge %s and no function on the path between them "+
		"has ACS redirect set, so DMA uses PCI bus addresses", d.bdf)
	if d.redir == maybe {
		d.acsNotRead = fmt.Sprintf("the verdict depends on ACS Control of %s, which was not read", d.bdf)
	}
}

const selfReason = "provider and client are the same function and it has no ACS redirect set"

// hostState mirrors pci_host_bridge_dev() and the table lookup of
// __host_bridge_whitelist() in drivers/pci/p2pdma.c: the first function on the root
// bus must be devfn 00.0 or a PCI Express Root Port, and its vendor and device must
// match an entry of the kernel's whitelist.
func (c *Calculator) hostState(h *pcie.HostBridge) hostInfo {
	info := hostInfo{name: h.Name}
	root := h.FirstDevice()
	if root == nil {
		info.text = fmt.Sprintf("host bridge %s has no function on its root bus", h.Name)
		return info
	}
	bdf := root.Address.String()
	if root.Address.DevFn() != 0 {
		pt, ok := root.PortType()
		switch {
		case ok && pt == pcie.PortRootPort:
		case ok || (root.Config != nil && root.Config.CapsKnown):
			info.text = fmt.Sprintf("the first function on the root bus of host bridge %s, %s, is neither 00.0 "+
				"nor a Root Port, so the kernel finds no device to look up in the P2PDMA whitelist", h.Name, bdf)
			return info
		default:
			info.state = maybe
			info.text = fmt.Sprintf("the PCI Express port type of %s, the first function on the root bus of "+
				"host bridge %s, was not read (needs CAP_SYS_ADMIN); the kernel uses it only if it is a Root Port",
				bdf, h.Name)
			info.unknown = UnknownFact{Kind: PortTypeUnread, Device: &root.Address, Detail: info.text}
			return info
		}
	}
	for i := range whitelist {
		e := &whitelist[i]
		if !e.matches(root.Vendor, root.Device) {
			continue
		}
		switch e.presence(c.plat.Kernel) {
		case no:
			continue
		case yes:
			info.state = yes
			info.text = fmt.Sprintf("host bridge %s is in the P2PDMA whitelist (%s, its first function, is %04x:%04x, %s)",
				h.Name, bdf, root.Vendor, root.Device, e.Comment)
		case maybe:
			info.state = maybe
			info.text = fmt.Sprintf("host bridge %s (first function %s, %04x:%04x, %s) is in the P2PDMA whitelist "+
				"from Linux %s on, not in %s, and kernel %s lies in between or is unknown",
				h.Name, bdf, root.Vendor, root.Device, e.Comment, e.Since, e.After, c.plat.Kernel)
			info.unknown = UnknownFact{Kind: WhitelistVersion, Device: &root.Address, Detail: info.text}
		}
		info.entry = e
		return info
	}
	info.text = fmt.Sprintf("host bridge not in P2PDMA whitelist: %04x:%04x (%s, first function of %s)",
		root.Vendor, root.Device, bdf, h.Name)
	return info
}

// hostWhitelisted is __host_bridge_whitelist() for one host bridge: whether traffic
// may pass through it, given whether both functions are below it.
func (c *Calculator) hostWhitelisted(h int32, same bool) (tri, *hostInfo, string) {
	info := &c.hosts[h]
	if info.entry != nil && info.entry.SameHostBridge && !same {
		return no, info, fmt.Sprintf("the whitelist entry %s of host bridge %s (%s) requires both functions below "+
			"the same host bridge", info.entry, info.name, info.entry.Comment)
	}
	return info.state, info, info.text
}

// hostCase is the HOST_BRIDGE part of calc_map_type_and_dist(): traffic goes through
// the root complex if cpu_supports_p2pdma() or host_bridge_whitelist() allows it,
// otherwise the pair is not supported. why is the clause that led here.
func (c *Calculator) hostCase(ha, hb int32, why string) hostOutcome {
	k := c.plat.Kernel
	if !k.IsZero() && k.Compare(kernelCPURule) < 0 {
		return hostOutcome{mapType: Unknown,
			text: fmt.Sprintf("%s, and Linux %s decides such paths by rules older than 5.9 that are not modelled", why, k),
			unknown: UnknownFact{Kind: OldKernelRules,
				Detail: fmt.Sprintf("host-bridge rules of Linux %s (before 5.9) are not modelled", k)}}
	}
	if c.plat.cpuSupportsP2PDMA() {
		return hostOutcome{mapType: ThruHostBridge,
			text: fmt.Sprintf("%s; the CPU (AuthenticAMD family %#x) is AMD Zen or newer, so the kernel sends the "+
				"traffic through the host bridge", why, c.plat.CPUFamily)}
	}
	var ok tri
	var text string
	var which *hostInfo // the host bridge whose state decided, for an unknown
	if ha == hb {
		ok, which, text = c.hostWhitelisted(ha, true)
	} else {
		okA, infoA, textA := c.hostWhitelisted(ha, false)
		okB, infoB, textB := c.hostWhitelisted(hb, false)
		switch {
		case okA == no:
			ok, text = no, textA
		case okB == no:
			ok, text = no, textB
		case okA == maybe:
			ok, which, text = maybe, infoA, textA
		case okB == maybe:
			ok, which, text = maybe, infoB, textB
		default:
			ok, text = yes, textA+", and "+textB
		}
	}
	switch ok {
	case yes:
		return hostOutcome{mapType: ThruHostBridge, text: why + "; the traffic goes through the host bridge: " + text}
	case no:
		return hostOutcome{mapType: NotSupported,
			text: why + ", and no whitelisted host bridge joins them: " + text}
	}
	return hostOutcome{mapType: Unknown, text: why + "; " + text, unknown: which.unknown}
}

// Calc returns the verdict for provider and client, which must be functions of the
// topology the Calculator was built from (else the verdict is Unknown).
func (c *Calculator) Calc(provider, client *pcie.Device) Verdict {
	pi, okP := c.index[provider]
	ci, okC := c.index[client]
	if !okP || !okC {
		v := Verdict{MapType: Unknown, ACSRedirect: noRedirect, Reason: notInTopology}
		if provider != nil {
			v.Provider = provider.Address
		}
		if client != nil {
			v.Client = client.Address
		}
		v.Unknowns = []UnknownFact{{Kind: NotInTopology}}
		return v
	}
	return c.calc(pi, ci)
}

// All yields the verdict of every ordered pair of distinct functions of devices,
// provider-major in the order given, as `p2pcheck pairs --all` lists them.
func (c *Calculator) All(devices []*pcie.Device) iter.Seq[Verdict] {
	return func(yield func(Verdict) bool) {
		idx := make([]int32, len(devices))
		for i, d := range devices {
			j, ok := c.index[d]
			if !ok {
				j = -1
			}
			idx[i] = j
		}
		for i, p := range devices {
			for j, q := range devices {
				if i == j {
					continue
				}
				var v Verdict
				if idx[i] < 0 || idx[j] < 0 {
					v = c.Calc(p, q)
				} else {
					v = c.calc(idx[i], idx[j])
				}
				if !yield(v) {
					return
				}
			}
		}
	}
}

// calc mirrors calc_map_type_and_dist() in drivers/pci/p2pdma.c (identical from 5.9
// through the newest PCI tree examined).
func (c *Calculator) calc(pi, ci int32) Verdict {
	p, q := &c.devs[pi], &c.devs[ci]
	v := Verdict{Provider: p.addr, Client: q.addr, ACSRedirect: noRedirect}
	if k := c.plat.Kernel; !k.IsZero() && k.Compare(kernelFirstP2PDMA) < 0 {
		v.MapType = NotSupported
		v.Distance = -1
		v.Reason = fmt.Sprintf("Linux %s has no PCI P2PDMA (added in 4.20)", k)
		return v
	}
	// The kernel walks the provider up one bridge at a time and, at each, walks the
	// client up looking for it; the first hit is the common upstream bridge.
	for da, a := range p.chain {
		for db, b := range q.chain {
			if a == b {
				return c.common(v, p, q, a, da, db)
			}
		}
	}
	// No common upstream bridge: the distance is both chains' lengths, and ACS hits
	// met on the way are ignored.
	v.Distance = len(p.chain) + len(q.chain)
	var out hostOutcome
	switch {
	case p.loop || q.loop:
		out = hostOutcome{mapType: Unknown, text: "the upstream chain of the provider or the client does not end (the tree has a loop)",
			unknown: UnknownFact{Kind: TreeLoop}}
	case p.hb < 0 || q.hb < 0:
		out = c.noHost
	default:
		out = c.noCommon[int(p.hb)*len(c.hosts)+int(q.hb)]
	}
	v.MapType, v.Reason = out.mapType, out.text
	if out.unknown.Kind != 0 {
		v.Unknowns = []UnknownFact{out.unknown}
	}
	return v
}

// common finishes calc() once the common upstream bridge is found: the provider's
// chain up to and including it and the client's chain below it are checked for ACS
// redirect, in that order.
func (c *Calculator) common(v Verdict, p, q *devInfo, top int32, da, db int) Verdict {
	v.Distance = da + db
	v.Common = &c.devs[top].addr
	provSide, clientSide := p.chain[:da+1], q.chain[:db]
	var redir, unread int
	firstUnread := int32(-1)
	for _, s := range [2][]int32{provSide, clientSide} {
		for _, x := range s {
			switch c.devs[x].redir {
			case yes:
				redir++
			case maybe:
				if unread == 0 {
					firstUnread = x
				}
				unread++
			}
		}
	}
	if redir == 0 && unread == 0 {
		v.MapType = BusAddr
		if p == q {
			v.Reason = selfReason
		} else {
			v.Reason = c.devs[top].busReason
		}
		return v
	}
	if unread > 0 {
		v.Unknowns = make([]UnknownFact, 0, unread)
		for _, s := range [2][]int32{provSide, clientSide} {
			for _, x := range s {
				if d := &c.devs[x]; d.redir == maybe {
					v.Unknowns = append(v.Unknowns, UnknownFact{Kind: ACSUnread, Device: &d.addr})
				}
			}
		}
	}
	if redir == 0 {
		// Whether any of the unread functions redirects decides between bus-addr and
		// the host-bridge case.
		v.MapType = Unknown
		v.Reason = c.devs[firstUnread].acsNotRead
		return v
	}
	e := c.redirected(provSide, clientSide, p.hb, q.hb)
	v.MapType, v.ACSRedirect, v.Reason, v.Fix = e.mapType, e.redirect, e.reason, e.fix
	if e.unknown.Kind != 0 {
		v.Unknowns = append(v.Unknowns, e.unknown)
	}
	return v
}

// redirectKey identifies the part of a verdict that ACS redirection decides: the
// chain segments checked on each side, each trimmed of leading functions without
// redirect set (a segment is then the first n elements of its first function's
// chain), and the two host bridges.
type redirectKey struct {
	p, pn, q, qn, hp, hq int32
}

// redirectEntry is that part of a verdict, shared by every pair with the same key.
type redirectEntry struct {
	mapType  MapType
	redirect []pcie.Address
	reason   string
	fix      *Fix
	unknown  UnknownFact
}

// trim drops the leading functions of seg that have no redirect set, returning the
// rest as (first function, length), or (-1, 0) when none is left.
func (c *Calculator) trim(seg []int32) (int32, int32) {
	for i, x := range seg {
		if c.devs[x].redir == yes {
			return x, int32(len(seg) - i)
		}
	}
	return -1, 0
}

// redirected returns the verdict part for a pair with ACS redirect on the path,
// computing it once per key: the pairs of a large tree share few distinct ones.
func (c *Calculator) redirected(provSide, clientSide []int32, hp, hq int32) *redirectEntry {
	var k redirectKey
	k.p, k.pn = c.trim(provSide)
	k.q, k.qn = c.trim(clientSide)
	k.hp, k.hq = hp, hq
	c.mu.RLock()
	e := c.redirects[k]
	c.mu.RUnlock()
	if e != nil {
		return e
	}
	e = &redirectEntry{}
	var names []string
	for _, seg := range [2][]int32{c.segment(k.p, k.pn), c.segment(k.q, k.qn)} {
		for _, x := range seg {
			if d := &c.devs[x]; d.redir == yes {
				e.redirect = append(e.redirect, d.addr)
				names = append(names, d.bdf)
			}
		}
	}
	e.fix = &Fix{Bridges: e.redirect}
	why := fmt.Sprintf("ACS redirect is set on %s, between the client and provider, so the kernel treats "+
		"the path as one through the root complex", strings.Join(names, ", "))
	out := c.noHost
	if hp >= 0 && hq >= 0 {
		out = c.hostCase(hp, hq, why)
	}
	e.mapType, e.reason, e.unknown = out.mapType, out.text, out.unknown
	c.mu.Lock()
	if prev := c.redirects[k]; prev != nil {
		e = prev
	} else {
		c.redirects[k] = e
	}
	c.mu.Unlock()
	return e
}

// segment returns the first n elements of x's chain.
func (c *Calculator) segment(x, n int32) []int32 {
	if n == 0 {
		return nil
	}
	return c.devs[x].chain[:n]
}
