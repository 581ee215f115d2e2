package p2pdma

import (
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/p2pkit/p2pkit/internal/forest"
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

// devInfo is what the Calculator precomputes for one function. The chain the kernel
// walks from it (pci_upstream_bridge() applied repeatedly) is its path to the root in
// the Calculator's forest; what a pair needs of two chains is read from counts and
// nearest-function links kept per function, so that a pair costs O(log depth)
// steps, not a walk of both chains.
type devInfo struct {
	addr  pcie.Address
	bdf   string
	loop  bool // the chain does not end within maxChain
	redir tri  // pci_bridge_has_acs_redir(): no, yes, maybe (ACS not read)
	hb    int32
	// yes and maybe count the functions of the chain, this one included, with ACS
	// redirect set and with ACS not read; nearYes and nearMaybe are the nearest of
	// them on the chain (this function first), -1 when there is none.
	yes, maybe         int32
	nearYes, nearMaybe int32
	// nearGap and nearBad are the nearest functions of the chain (this one first)
	// whose link to the next is not known (the owner of the link, the function or
	// its PF, has pcie.Device.PathIncomplete) or cannot exist (its parent is an
	// endpoint: pcie.Device.BelowEndpoint); -1 when there is none.
	nearGap, nearBad int32

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
	funcs []*pcie.Device // by index
	tree  *forest.Forest // chains: a function's parent is pci_upstream_bridge()
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

// NewCalculator precomputes, for every function of t, its upstream chain (as a
// forest with lowest-common-ancestor tables, internal/forest), its ACS redirect state
// and its host bridge, and for every host bridge its whitelist state: O(n log depth)
// work and memory.
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
	// order grows while parents are indexed: an upstream bridge missing from
	// t.Devices is indexed too.
	var parent []int32
	for i := 0; i < len(order); i++ {
		d := order[i]
		up := int32(-1)
		if u := d.Upstream(); u != nil {
			up = add(u)
		}
		parent = append(parent, up)
		c.devs = append(c.devs, devInfo{addr: d.Address, bdf: d.Address.String(), hb: addHost(d.HostBridge), redir: acsRedirState(d)})
	}
	c.funcs = order
	c.tree = forest.New(parent)
	c.fillChains()
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

// fillChains sets what devInfo keeps of each function's chain, parents first.
func (c *Calculator) fillChains() {
	for _, x := range c.tree.TopDown() {
		d := &c.devs[x]
		d.nearYes, d.nearMaybe, d.nearGap, d.nearBad = -1, -1, -1, -1
		d.loop = c.tree.Depth(x) >= maxChain || c.tree.Cut(x) // a cut link closed a cycle
		if p := c.tree.Parent(x); p >= 0 {
			up := &c.devs[p]
			d.yes, d.maybe = up.yes, up.maybe
			d.nearYes, d.nearMaybe, d.nearGap, d.nearBad = up.nearYes, up.nearMaybe, up.nearGap, up.nearBad
			d.loop = d.loop || up.loop
		}
		switch d.redir {
		case yes:
			d.yes++
			d.nearYes = x
		case maybe:
			d.maybe++
			d.nearMaybe = x
		}
		owner := c.linkOwner(x)
		if owner.PathIncomplete {
			d.nearGap = x
		}
		if owner.BelowEndpoint {
			d.nearBad = x
		}
	}
}

// linkOwner returns the function whose link to its parent x's chain takes: x, or
// for a VF its PF.
func (c *Calculator) linkOwner(x int32) *pcie.Device {
	if pf := c.funcs[x].PF; pf != nil {
		return pf
	}
	return c.funcs[x]
}

// chainLen is the number of functions of x's chain the kernel walks: the function
// and its upstream bridges, at most maxChain.
func (c *Calculator) chainLen(x int32) int { return min(c.tree.Depth(x)+1, maxChain) }

// below reports whether y, a function of a chain, lies below top on it (top -1: the
// chain's end, so any y), y -1 meaning none.
func (c *Calculator) below(y, top int32) bool {
	return y >= 0 && (top < 0 || c.tree.Depth(y) > c.tree.Depth(top))
}

// next returns the function after y on its chain, -1 at the end.
func (c *Calculator) next(y int32) int32 { return c.tree.Parent(y) }

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
	return c.calc(pi, ci, true)
}

// Brief is Calc, less the whole list of unread ACS: Unknowns holds only the first
// function on the path whose ACS was not read (there may be one per bridge of the
// path), so that a caller judging many pairs by their verdicts' kinds does no work
// in the length of the path. Every other field is Calc's.
func (c *Calculator) Brief(provider, client *pcie.Device) Verdict {
	pi, okP := c.index[provider]
	ci, okC := c.index[client]
	if !okP || !okC {
		return c.Calc(provider, client)
	}
	return c.calc(pi, ci, false)
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
					v = c.calc(idx[i], idx[j], true)
				}
				if !yield(v) {
					return
				}
			}
		}
	}
}

// calc mirrors calc_map_type_and_dist() in drivers/pci/p2pdma.c (identical from 5.9
// through the newest PCI tree examined); full lists every function of the path whose
// ACS was not read, else only the first (see Brief).
func (c *Calculator) calc(pi, ci int32, full bool) Verdict {
	p, q := &c.devs[pi], &c.devs[ci]
	v := Verdict{Provider: p.addr, Client: q.addr, ACSRedirect: noRedirect}
	if k := c.plat.Kernel; !k.IsZero() && k.Compare(kernelFirstP2PDMA) < 0 {
		v.MapType = NotSupported
		v.Distance = -1
		v.Reason = fmt.Sprintf("Linux %s has no PCI P2PDMA (added in 4.20)", k)
		return v
	}
	// The kernel walks the provider up one bridge at a time and, at each, walks the
	// client up looking for it; the first hit is the common upstream bridge: the
	// lowest common ancestor of the two in the forest of chains, when the kernel's
	// walks of at most maxChain steps reach it.
	if top := c.tree.LCA(pi, ci); top >= 0 {
		da, db := c.tree.Depth(pi)-c.tree.Depth(top), c.tree.Depth(ci)-c.tree.Depth(top)
		if da < maxChain && db < maxChain {
			return c.impossible(c.common(v, pi, ci, top, da, db, full), pi, ci, top)
		}
	}
	// No common upstream bridge: the distance is both chains' lengths, and ACS hits
	// met on the way are ignored.
	v.Distance = c.chainLen(pi) + c.chainLen(ci)
	c.noCommonVerdict(&v, p.loop || q.loop, p, q)
	return c.impossible(v, pi, ci, -1)
}

// noCommonVerdict sets v's outcome for devices p and q with no common upstream
// bridge: unknown when a chain loops, else the host bridges' case (the whitelist).
func (c *Calculator) noCommonVerdict(v *Verdict, loop bool, p, q *devInfo) {
	var out hostOutcome
	switch {
	case loop:
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
}

// impossible makes v Unknown when either walk, up to top (exclusive; -1: the whole
// chains), crosses a link the kernel cannot have built: a function below an
// endpoint (pcie.Device.BelowEndpoint). The kernel enumerates no such tree, so it
// has no verdict to mirror.
func (c *Calculator) impossible(v Verdict, pi, ci, top int32) Verdict {
	for _, x := range [2]int32{pi, ci} {
		y := c.devs[x].nearBad
		if !c.below(y, top) {
			continue
		}
		u := UnknownFact{Kind: TreeImpossible, Device: &c.linkOwner(y).Address}
		v.MapType = Unknown
		v.Reason = "the kernel cannot build this tree: " + u.String() + "; so there is no kernel verdict to mirror"
		v.Fix = nil
		v.Unknowns = append(v.Unknowns, u)
		return v
	}
	return v
}

// common finishes calc() once the common upstream bridge top is found, da and db
// steps above the provider pi and the client ci: the provider's chain up to and
// including top and the client's chain below it are checked for ACS redirect, in
// that order.
func (c *Calculator) common(v Verdict, pi, ci, top int32, da, db int, full bool) Verdict {
	p, q, t := &c.devs[pi], &c.devs[ci], &c.devs[top]
	v.Distance = da + db
	v.Common = &t.addr
	// Counts on the provider's side (top included) and the client's (top excluded).
	redir := p.yes - t.yes + q.yes - t.yes
	unread := p.maybe - t.maybe + q.maybe - t.maybe
	switch t.redir {
	case yes:
		redir++
	case maybe:
		unread++
	}
	if redir == 0 && unread == 0 {
		v.MapType = BusAddr
		if pi == ci {
			v.Reason = selfReason
		} else {
			v.Reason = t.busReason
		}
		return v
	}
	firstUnread := int32(-1)
	if unread > 0 {
		if !full {
			unread = 1
		}
		v.Unknowns = make([]UnknownFact, 0, unread)
		// The provider's side up to top, then the client's below it.
		for _, side := range [2]struct{ from, above int32 }{{pi, c.next(top)}, {ci, top}} {
			for x := c.devs[side.from].nearMaybe; c.below(x, side.above) && len(v.Unknowns) < int(unread); x = c.nextMaybe(x) {
				if firstUnread < 0 {
					firstUnread = x
				}
				v.Unknowns = append(v.Unknowns, UnknownFact{Kind: ACSUnread, Device: &c.devs[x].addr})
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
	e := c.redirected(pi, ci, top)
	v.MapType, v.ACSRedirect, v.Reason, v.Fix = e.mapType, e.redirect, e.reason, e.fix
	if e.unknown.Kind != 0 {
		v.Unknowns = append(v.Unknowns, e.unknown)
	}
	return v
}

// nextMaybe returns the nearest function above x on its chain whose ACS was not
// read, -1 when there is none.
func (c *Calculator) nextMaybe(x int32) int32 {
	if p := c.next(x); p >= 0 {
		return c.devs[p].nearMaybe
	}
	return -1
}

// nextYes is nextMaybe for functions with ACS redirect set.
func (c *Calculator) nextYes(x int32) int32 {
	if p := c.next(x); p >= 0 {
		return c.devs[p].nearYes
	}
	return -1
}

// redirectKey identifies the part of a verdict that ACS redirection decides: the
// chain segments checked on each side, each trimmed of leading functions without
// redirect set (a segment is then the first n functions of its first function's
// chain; -1, 0 when none is left), and the two host bridges.
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

// redirected returns the verdict part for the pair pi, ci with ACS redirect on the
// path below and at top, computing it once per key: the pairs of a large tree share
// few distinct ones.
func (c *Calculator) redirected(pi, ci, top int32) *redirectEntry {
	k := redirectKey{p: -1, q: -1, hp: c.devs[pi].hb, hq: c.devs[ci].hb}
	dt := int32(c.tree.Depth(top))
	if x := c.devs[pi].nearYes; c.below(x, c.next(top)) {
		k.p, k.pn = x, int32(c.tree.Depth(x))-dt+1
	}
	if x := c.devs[ci].nearYes; c.below(x, top) {
		k.q, k.qn = x, int32(c.tree.Depth(x))-dt
	}
	c.mu.RLock()
	e := c.redirects[k]
	c.mu.RUnlock()
	if e != nil {
		return e
	}
	e = &redirectEntry{}
	var names []string
	for _, seg := range [2][2]int32{{k.p, k.pn}, {k.q, k.qn}} {
		if seg[0] < 0 {
			continue
		}
		end := int32(c.tree.Depth(seg[0])) - seg[1] // depth just above the segment
		for x := seg[0]; x >= 0 && int32(c.tree.Depth(x)) > end; x = c.nextYes(x) {
			d := &c.devs[x]
			e.redirect = append(e.redirect, d.addr)
			names = append(names, d.bdf)
		}
	}
	e.fix = &Fix{Bridges: e.redirect}
	why := fmt.Sprintf("ACS redirect is set on %s, between the client and provider, so the kernel treats "+
		"the path as one through the root complex", strings.Join(names, ", "))
	out := c.noHost
	if k.hp >= 0 && k.hq >= 0 {
		out = c.hostCase(k.hp, k.hq, why)
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

// Twins partitions devices, distinct functions of the Calculator's topology, into
// classes of functions that every verdict treats alike, so that a caller counting
// the verdicts of many pairs (the report) can judge one pair per two classes instead
// of every pair. It returns each device's class, numbered from 0 in order of first
// appearance.
//
// Two functions are twins when neither has one of devices below it, both have the
// same host bridge, the same ACS state (not set, or not read), the same link state
// (pcie.Device.PathIncomplete, BelowEndpoint) and below maxChain bridges, and their
// chains meet at the same function above them, climbing through bridges that have
// none of devices but them below, no ACS redirect set or unread, and links that are
// known and possible. For twins x and y and any other function z of devices, the
// verdicts of (x, z) and (y, z), both ways, and of (x, y) and (y, x) agree in map
// type, in ACSRedirect and Fix and in the kinds of their unknowns; Distance, Reason
// and the functions unknowns name may differ. A function with ACS redirect set is
// a class of its own, since the verdicts name it.
func (c *Calculator) Twins(devices []*pcie.Device) []int32 {
	idx := make([]int32, len(devices))
	below := make([]int32, len(c.devs)) // functions of devices at or below each function
	for i, d := range devices {
		x, ok := c.index[d]
		if !ok {
			x = -1
		}
		idx[i] = x
	}
	for _, x := range idx {
		if x >= 0 {
			below[x]++
		}
	}
	td := c.tree.TopDown()
	for i := len(td) - 1; i >= 0; i-- {
		if x := td[i]; below[x] > 0 {
			if p := c.tree.Parent(x); p >= 0 {
				below[p] += below[x]
			}
		}
	}
	type key struct {
		meet      int32 // where the chain leaves the bridges above it alone, -1 at its end
		hb        int32
		redir     tri
		gap, bad  bool
		singleton int32 // the function itself, for a class of its own; -1 otherwise
	}
	classes := map[key]int32{}
	out := make([]int32, len(devices))
	for i, x := range idx {
		k := key{meet: -1, singleton: -1}
		if x < 0 || below[x] > 1 || c.devs[x].redir == yes || c.devs[x].loop {
			k.singleton = int32(i)
		} else {
			d := &c.devs[x]
			k.hb, k.redir = d.hb, d.redir
			owner := c.linkOwner(x)
			k.gap, k.bad = owner.PathIncomplete, owner.BelowEndpoint
			k.meet = c.next(x)
			for k.meet >= 0 && below[k.meet] == 1 && c.transparent(k.meet) {
				k.meet = c.next(k.meet)
			}
		}
		id, ok := classes[k]
		if !ok {
			id = int32(len(classes))
			classes[k] = id
		}
		out[i] = id
	}
	return out
}

// transparent reports whether a verdict whose walk passes x leaves it out: no ACS
// redirect set or unread at x, and x's link to the next function known and possible.
func (c *Calculator) transparent(x int32) bool {
	d := &c.devs[x]
	owner := c.linkOwner(x)
	return d.redir == no && !d.loop && !owner.PathIncomplete && !owner.BelowEndpoint
}
