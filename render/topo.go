package render

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/internal/bytesize"
	"github.com/p2pkit/p2pkit/pcie"
)

// TopoText writes the tree like `lspci -tv`, one host bridge at a time, each
// function with its IDs and names, and an indented line of facts: port type,
// driver, link (lspci's "(downgraded)" marked), ACS control on bridges in lspci's
// words, NUMA node, IOMMU group and the large BARs. Every function is printed:
// those no host bridge reaches (a parent that was not read, a parent link that
// closed a loop) under an "unattached" heading, each with the reason.
//
// Lines of functions more than maxTreeLevels bridges deep draw only the last
// maxTreeLevels levels of the tree, after a count of those left out ("[+12] "), so
// that a line's length is bounded and the output is linear in the functions
// however deep the tree.
func TopoText(w io.Writer, t *pcie.Topology, s Style) error {
	p := newPrinter(w)
	tp := &treePrinter{p: p, s: s, printed: make(map[*pcie.Device]bool, len(t.Devices))}
	for i, hb := range t.HostBridges {
		if i > 0 {
			p.line("")
		}
		p.line(s.bold(Escape(hb.Name)) + s.dim(fmt.Sprintf("  host bridge, domain %04x, root bus %02x", hb.Domain, hb.Bus)))
		for j, d := range hb.Devices {
			tp.node(d, j == len(hb.Devices)-1)
		}
	}
	if unattached := unattached(t, tp.printed); len(unattached) > 0 {
		reasons := map[pcie.Address][]string{}
		for _, err := range t.Errors {
			var de *pcie.DeviceError
			if errors.As(err, &de) {
				reasons[de.Address] = append(reasons[de.Address], de.Err.Error())
			}
		}
		p.line("")
		p.line(s.warn("unattached: functions no host bridge reaches, each under its reason:"))
		for i, d := range unattached {
			if tp.printed[d] {
				continue // below an earlier unattached function
			}
			why := "parent not known"
			if r := reasons[d.Address]; len(r) > 0 {
				why = strings.Join(r, "; ")
			}
			p.line("   " + s.dim("("+Escape(why)+")"))
			tp.node(d, i == len(unattached)-1)
		}
	}
	if len(t.Errors) > 0 {
		p.line("")
		p.line(s.warn(fmt.Sprintf("%d problem(s) while reading the tree:", len(t.Errors))))
		for _, err := range t.Errors {
			p.line("  " + Escape(err.Error()))
		}
	}
	return p.done()
}

// maxTreeLevels is how many levels of the tree a line of TopoText draws; deeper
// lines start with the count of the levels left out. No real machine comes near:
// a DGX-class node is about eight bridges deep.
const maxTreeLevels = 16

// unattached returns the functions not yet printed whose parent chain ends in no
// printed function (each is visited once: the answer for a function is kept for
// those below it), in address order.
func unattached(t *pcie.Topology, printed map[*pcie.Device]bool) []*pcie.Device {
	const (
		unseen = iota
		visiting
		no  // does not reach a printed function
		yes // reaches one
	)
	state := make(map[*pcie.Device]uint8)
	var walk []*pcie.Device
	reaches := func(d *pcie.Device) bool {
		walk = walk[:0]
		x := d.Parent
		for x != nil && !printed[x] && state[x] == unseen {
			state[x] = visiting
			walk = append(walk, x)
			x = x.Parent
		}
		r := uint8(no) // a chain that ends, or loops back into itself
		if x != nil && (printed[x] || state[x] == yes) {
			r = yes
		}
		for _, w := range walk {
			state[w] = r
		}
		return r == yes
	}
	var out []*pcie.Device
	for _, d := range t.Devices {
		if !printed[d] && (d.Parent == nil || !reaches(d)) {
			out = append(out, d)
		}
	}
	return out
}

// treePrinter draws the tree: levels holds, for each level above the function
// being printed, whether the drawing continues there ("│") or not (the branch
// above was its parent's last).
type treePrinter struct {
	p       *printer
	s       Style
	printed map[*pcie.Device]bool
	levels  []bool
	b       strings.Builder
}

// indent is the drawing of the levels above the current function, the last
// maxTreeLevels of them after a count of the others.
func (tp *treePrinter) indent() string {
	tp.b.Reset()
	lv := tp.levels
	if n := len(lv) - maxTreeLevels; n > 0 {
		tp.b.WriteString("[+" + strconv.Itoa(n) + "] ")
		lv = lv[n:]
	}
	for _, more := range lv {
		if more {
			tp.b.WriteString("│  ")
		} else {
			tp.b.WriteString("   ")
		}
	}
	return tp.b.String()
}

func (tp *treePrinter) node(d *pcie.Device, last bool) {
	if tp.printed[d] {
		return // a loop the tree builder did not cut
	}
	tp.printed[d] = true
	branch, cont := "├─ ", "│  "
	if last {
		branch, cont = "└─ ", "   "
	}
	indent := tp.indent()
	tp.p.line(indent + branch + tp.s.bold(d.Address.String()) + " " + deviceTitle(d))
	if facts := deviceFacts(d, tp.s); facts != "" {
		tp.p.line(indent + cont + "   " + facts)
	}
	if line := acsLine(d, tp.s); line != "" {
		tp.p.line(indent + cont + "   " + line)
	}
	tp.levels = append(tp.levels, !last)
	for i, c := range d.Children {
		tp.node(c, i == len(d.Children)-1)
	}
	tp.levels = tp.levels[:len(tp.levels)-1]
}

// deviceTitle is "[10de:2335] 3D controller: NVIDIA Corporation GH100 [H200 SXM 141GB]",
// the class and product in lspci's words, escaped for a terminal.
func deviceTitle(d *pcie.Device) string {
	var b strings.Builder
	b.Grow(96)
	b.WriteByte('[')
	writeHex(&b, uint64(d.Vendor), 4)
	b.WriteByte(':')
	writeHex(&b, uint64(d.Record.Device), 4)
	b.WriteString("] ")
	b.WriteString(Escape(className(d)))
	b.WriteString(": ")
	b.WriteString(Escape(deviceName(d)))
	return b.String()
}

// className is the class's name from pci.ids with lspci's fallbacks, or "Class
// xxxx" without a database.
func className(d *pcie.Device) string {
	if d.ClassName != "" {
		return d.ClassName
	}
	return pcie.ClassText(d.ClassCode(), "", "")
}

// writeHex writes v in lower-case hexadecimal, zero-padded to digits.
func writeHex(b *strings.Builder, v uint64, digits int) {
	var buf [16]byte
	s := strconv.AppendUint(buf[:0], v, 16)
	for range digits - len(s) {
		b.WriteByte('0')
	}
	b.Write(s)
}

// deviceName is the vendor and device names as lspci prints them
// (pcie.ProductText): "Intel Corporation Device 347a" when pci.ids lacks the
// device, "Device 1234:1111" when it lacks the vendor.
func deviceName(d *pcie.Device) string {
	return pcie.ProductText(d.Vendor, d.Record.Device, d.VendorName, d.DeviceName)
}

// facts joins a device's facts with " · ".
type facts struct{ strings.Builder }

func (f *facts) add(parts ...string) {
	if f.Len() > 0 {
		f.WriteString(" · ")
	}
	for _, p := range parts {
		f.WriteString(p)
	}
}

func deviceFacts(d *pcie.Device, s Style) string {
	var f facts
	if pt, ok := d.PortType(); ok {
		f.add(pt.String())
	} else if d.Config == nil || !d.Config.CapsKnown {
		f.add(s.dim("port type unknown"))
	}
	if d.IsVF() {
		f.add("VF of ", d.PhysFn.String())
	}
	if n := len(d.VFs); n > 0 {
		f.add(strconv.Itoa(n), " VFs")
	}
	if d.Driver != "" {
		f.add("driver ", Escape(d.Driver))
	}
	if l := linkText(d, d.Link(), s); l != "" {
		f.add(l)
	}
	if d.NUMANode != nil {
		f.add("NUMA ", strconv.Itoa(*d.NUMANode))
	}
	if d.IOMMUGroup != nil {
		f.add("IOMMU group ", strconv.Itoa(*d.IOMMUGroup))
	}
	if bars := largeBARs(d); bars != "" {
		f.add(bars)
	}
	for _, i := range unreadBARs(d) {
		f.add(s.dim("BAR [" + strconv.Itoa(i) + "] unknown (resource line unreadable)"))
	}
	if d.P2PMem != nil {
		f.add("p2pmem ", bytesize.Format(d.P2PMem.Size), " (", bytesize.Format(d.P2PMem.Available), " free)")
	}
	if d.Err != nil {
		f.add(s.warn("read error: " + Escape(d.Err.Error())))
	}
	return f.String()
}

// linkText is "Gen5 x16", or "Gen4 x8 (max Gen5 x16)", followed by lspci's mark
// "(downgraded)" when d runs below its own capability (pcie.Device.LinkDowngraded);
// "" with nothing known.
func linkText(d *pcie.Device, l pcie.LinkState, s Style) string {
	if !l.Current.Known() && !l.Max.Known() {
		return ""
	}
	text := l.Current.String()
	if l.Current != l.Max && l.Max.Known() {
		text += " (max " + l.Max.String() + ")"
	}
	if down, _ := d.LinkDowngraded(); down {
		text += " " + s.warn("(downgraded)")
	}
	return text
}

// largeBARs lists memory BARs of 1 MiB and more, the ones that matter for P2P
// (a GPU's BAR1, an NVMe CMB), by lspci's region number: "BARs [0] 16 MiB,
// [2] 256 GiB". NVIDIA counts a 64-bit BAR once, so its "BAR1" is region 2.
func largeBARs(d *pcie.Device) string {
	var b strings.Builder
	for _, r := range d.BARs() {
		if !r.IsMem() || r.Size() < 1<<20 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("BARs ")
		} else {
			b.WriteString(", ")
		}
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(r.Index))
		b.WriteString("] ")
		b.WriteString(bytesize.Format(r.Size()))
	}
	return b.String()
}

// unreadBARs returns the BAR indices (0 to 5) whose resource line did not parse:
// their size and address are unknown, not absent.
func unreadBARs(d *pcie.Device) []int {
	var out []int
	for _, i := range d.ResourcesUnread {
		if i <= 5 {
			out = append(out, i)
		}
	}
	return out
}

// acsLine describes ACS on functions that have (or may have) it: bridges always,
// endpoints only when they have the capability.
func acsLine(d *pcie.Device, s Style) string {
	acs, known := d.ACS()
	switch {
	case !known && d.IsBridge():
		return s.dim("ACSCtl: unknown (" + configGap(d) + ")")
	case acs == nil:
		return ""
	}
	return "ACSCtl: " + acsBits(acs.Control, s)
}

// configGap says why config space did not show a capability: no config file at
// all, or only the 64 bytes an unprivileged reader gets (drivers/pci/pci-sysfs.c
// pci_read_config).
func configGap(d *pcie.Device) string {
	switch n := len(d.Record.Config); {
	case n == 0:
		return "no config space was read"
	case n <= pcie.ConfigHeaderSize:
		return "config space past 64 bytes needs root"
	}
	return "capability list unreadable"
}

// acsBits is lspci's rendering with the redirect bits the kernel tests
// (RR, CR, EC; drivers/pci/p2pdma.c pci_bridge_has_acs_redir) colored when set.
func acsBits(ctrl uint16, s Style) string {
	words := strings.Fields(pcie.ACSString(ctrl))
	for i, w := range words {
		if strings.HasSuffix(w, "+") && (strings.HasPrefix(w, "ReqRedir") || strings.HasPrefix(w, "CmpltRedir") || strings.HasPrefix(w, "EgressCtrl")) {
			words[i] = s.bad(w)
		}
	}
	return strings.Join(words, " ")
}

// printer writes lines through a buffer, keeping the first error; done flushes.
// Unbuffered, a tree of a thousand functions costs a thousand write calls.
type printer struct {
	w   *bufio.Writer
	err error
}

func newPrinter(w io.Writer) *printer { return &printer{w: bufio.NewWriter(w)} }

func (p *printer) line(s string) {
	if p.err == nil {
		_, p.err = p.w.WriteString(s)
	}
	if p.err == nil {
		p.err = p.w.WriteByte('\n')
	}
}

// done flushes what is buffered and returns the first error.
func (p *printer) done() error {
	if p.err == nil {
		p.err = p.w.Flush()
	}
	return p.err
}

// TopoJSON writes the full model: host bridges, switches, and every function with
// its IDs, names, tree links, port type, link, ACS, BARs, SR-IOV and p2pmem facts.
// Unknown facts are null, never a guessed value. errors lists the topology's
// per-function problems; warnings the loader's other ones (node.Node.Warnings; those
// that are topology errors are not repeated).
func TopoJSON(w io.Writer, t *pcie.Topology, warnings []error) error {
	doc := topoDoc{SchemaVersion: TopoSchemaVersion, HostBridges: []hostBridgeDoc{}, Switches: []switchDoc{}, Devices: []deviceDoc{}, Errors: []string{}, Warnings: []string{}}
	for _, w := range warnings {
		if !slices.Contains(t.Errors, w) {
			doc.Warnings = append(doc.Warnings, w.Error())
		}
	}
	for _, hb := range t.HostBridges {
		h := hostBridgeDoc{Name: hb.Name, Domain: fmt.Sprintf("%04x", hb.Domain), Bus: fmt.Sprintf("%02x", hb.Bus), Devices: addrs(hb.Devices)}
		doc.HostBridges = append(doc.HostBridges, h)
	}
	for _, sw := range t.Switches {
		doc.Switches = append(doc.Switches, switchDoc{Upstream: sw.Upstream.Address, Downstream: addrs(sw.Downstream), Inferred: sw.Inferred})
	}
	for _, d := range t.Devices {
		doc.Devices = append(doc.Devices, newDeviceDoc(d))
	}
	for _, err := range t.Errors {
		doc.Errors = append(doc.Errors, err.Error())
	}
	return writeJSON(w, doc)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func addrs(ds []*pcie.Device) []pcie.Address {
	out := make([]pcie.Address, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Address)
	}
	return out
}

// TopoSchemaVersion is the version of schema/topo.v1.json that TopoJSON writes in
// "schema_version".
const TopoSchemaVersion = "1"

type topoDoc struct {
	SchemaVersion string          `json:"schema_version"`
	HostBridges   []hostBridgeDoc `json:"host_bridges"`
	Switches      []switchDoc     `json:"switches"`
	Devices       []deviceDoc     `json:"devices"`
	Errors        []string        `json:"errors"`
	Warnings      []string        `json:"warnings"`
}

type hostBridgeDoc struct {
	Name    string         `json:"name"`
	Domain  string         `json:"domain"`
	Bus     string         `json:"bus"`
	Devices []pcie.Address `json:"root_bus_devices"`
}

type switchDoc struct {
	Upstream   pcie.Address   `json:"upstream"`
	Downstream []pcie.Address `json:"downstream"`
	Inferred   bool           `json:"inferred"`
}

type deviceDoc struct {
	Address         pcie.Address      `json:"address"`
	HostBridge      *string           `json:"host_bridge"`
	Parent          *pcie.Address     `json:"parent"`
	Children        []pcie.Address    `json:"children"`
	Vendor          string            `json:"vendor"`
	Device          string            `json:"device"`
	SubsystemVendor string            `json:"subsystem_vendor"`
	SubsystemDevice string            `json:"subsystem_device"`
	Class           string            `json:"class"`
	Revision        string            `json:"revision"`
	VendorName      string            `json:"vendor_name,omitempty"`
	DeviceName      string            `json:"device_name,omitempty"`
	ClassName       string            `json:"class_name,omitempty"`
	SubsystemName   string            `json:"subsystem_name,omitempty"`
	Driver          string            `json:"driver,omitempty"`
	NUMANode        *int              `json:"numa_node"`
	IOMMUGroup      *int              `json:"iommu_group"`
	LocalCPUs       string            `json:"local_cpulist,omitempty"`
	ConfigSize      int               `json:"config_size"`
	HeaderType      *int              `json:"header_type"`
	Bus             *busDoc           `json:"bus_numbers,omitempty"`
	PortType        *string           `json:"port_type"`
	Link            linkDoc           `json:"link"`
	ACS             acsDoc            `json:"acs"`
	BARs            []barDoc          `json:"bars"`
	BARsUnread      []int             `json:"bars_unread,omitempty"`
	PhysFn          *pcie.Address     `json:"physfn,omitempty"`
	VirtFns         []pcie.Address    `json:"virtfns,omitempty"`
	SRIOV           *pcie.SRIOVCounts `json:"sriov,omitempty"`
	P2PMem          *pcie.P2PMem      `json:"p2pmem,omitempty"`
	NetDevs         []string          `json:"netdevs,omitempty"`
	RDMADevs        []string          `json:"rdma_devices,omitempty"`
	NVMeDevs        []string          `json:"nvme,omitempty"`
	Error           string            `json:"error,omitempty"`
}

type busDoc struct {
	Primary     string `json:"primary"`
	Secondary   string `json:"secondary"`
	Subordinate string `json:"subordinate"`
}

// linkDoc: downgraded is lspci's "(downgraded)" (pcie.Device.LinkDowngraded), null
// when it could not be judged.
type linkDoc struct {
	Current    *linkSide `json:"current"`
	Max        *linkSide `json:"max"`
	Downgraded *bool     `json:"downgraded"`
}

func newLinkDoc(d *pcie.Device, l pcie.LinkState) linkDoc {
	doc := linkDoc{Current: newLinkSide(l.Current), Max: newLinkSide(l.Max)}
	if down, known := d.LinkDowngraded(); known {
		doc.Downgraded = &down
	}
	return doc
}

type linkSide struct {
	Generation int    `json:"generation"`
	Speed      string `json:"speed"`
	Width      int    `json:"width"`
}

// acsDoc: known false means config space past 64 bytes was unreadable.
type acsDoc struct {
	Known       bool    `json:"known"`
	Present     bool    `json:"present"`
	Capability  *string `json:"capability,omitempty"`
	Control     *string `json:"control,omitempty"`
	ControlText string  `json:"control_text,omitempty"`
}

type barDoc struct {
	Index        int    `json:"index"`
	Start        string `json:"start"`
	Size         uint64 `json:"size"`
	Mem          bool   `json:"mem"`
	Is64         bool   `json:"is_64bit"`
	Prefetchable bool   `json:"prefetchable"`
}

func newDeviceDoc(d *pcie.Device) deviceDoc {
	doc := deviceDoc{
		Address:         d.Address,
		Children:        addrs(d.Children),
		Vendor:          fmt.Sprintf("%04x", d.Vendor),
		Device:          fmt.Sprintf("%04x", d.Record.Device),
		SubsystemVendor: fmt.Sprintf("%04x", d.SubVendor),
		SubsystemDevice: fmt.Sprintf("%04x", d.SubDevice),
		Class:           fmt.Sprintf("%06x", d.ClassCode()),
		Revision:        fmt.Sprintf("%02x", d.Revision),
		VendorName:      d.VendorName,
		DeviceName:      d.DeviceName,
		ClassName:       d.ClassName,
		SubsystemName:   d.SubsystemName,
		Driver:          d.Driver,
		NUMANode:        d.NUMANode,
		IOMMUGroup:      d.IOMMUGroup,
		LocalCPUs:       d.LocalCPUList,
		ConfigSize:      len(d.Record.Config),
		BARs:            []barDoc{},
		PhysFn:          d.PhysFn,
		VirtFns:         d.VirtFns,
		SRIOV:           d.SRIOV,
		P2PMem:          d.P2PMem,
		NetDevs:         d.NetDevs,
		RDMADevs:        d.RDMADevs,
		NVMeDevs:        d.NVMeDevs,
	}
	if d.HostBridge != nil {
		doc.HostBridge = &d.HostBridge.Name
	}
	if d.Parent != nil {
		doc.Parent = &d.Parent.Address
	}
	if c := d.Config; c != nil {
		ht := int(c.HeaderType)
		doc.HeaderType = &ht
		if c.HeaderType == 1 || c.HeaderType == 2 {
			doc.Bus = &busDoc{Primary: fmt.Sprintf("%02x", c.PrimaryBus), Secondary: fmt.Sprintf("%02x", c.SecondaryBus), Subordinate: fmt.Sprintf("%02x", c.SubordinateBus)}
		}
	}
	if pt, ok := d.PortType(); ok {
		name := pt.String()
		doc.PortType = &name
	}
	doc.Link = newLinkDoc(d, d.Link())
	acs, known := d.ACS()
	doc.ACS.Known = known
	if acs != nil {
		doc.ACS.Present = true
		capStr, ctrlStr := fmt.Sprintf("0x%04x", acs.Capability), fmt.Sprintf("0x%04x", acs.Control)
		doc.ACS.Capability, doc.ACS.Control = &capStr, &ctrlStr
		doc.ACS.ControlText = pcie.ACSString(acs.Control)
	}
	doc.BARsUnread = unreadBARs(d)
	for _, r := range d.BARs() {
		doc.BARs = append(doc.BARs, barDoc{Index: r.Index, Start: fmt.Sprintf("0x%x", r.Start), Size: r.Size(), Mem: r.IsMem(), Is64: r.Is64(), Prefetchable: r.Prefetchable()})
	}
	if d.Err != nil {
		doc.Error = d.Err.Error()
	}
	return doc
}

func newLinkSide(l pcie.Link) *linkSide {
	if !l.Known() {
		return nil
	}
	return &linkSide{Generation: int(l.Speed), Speed: l.Speed.GTs(), Width: l.Width}
}
