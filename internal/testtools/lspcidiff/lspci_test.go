package lspcidiff

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/pciids"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// pciIDs is the database both sides name devices from: Debian's, which pciutils
// installs.
const pciIDs = "/usr/share/misc/pci.ids"

// lspci returns the path of lspci, or skips the test: CI installs pciutils, so there
// (CI=true) a missing lspci or pci.ids fails the test instead.
func lspci(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("lspci")
	if err == nil {
		_, err = os.Stat(pciIDs)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pciutils is required in CI: %v", err)
		}
		t.Skipf("pciutils not installed (%v): apt-get install pciutils", err)
	}
	return path
}

// tree is one sysfs tree on disk: dir stands for /.
type tree struct{ name, dir string }

// trees unpacks every snapshot under testdata/ and writes every fixture machine.
func trees(t *testing.T) []tree {
	t.Helper()
	var out []tree
	root := filepath.Join("..", "..", "..", "testdata")
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".tar.gz") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		dir := t.TempDir()
		roottest.Unpack(t, p, dir)
		out = append(out, tree{"testdata/" + filepath.ToSlash(rel), dir})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no snapshots under testdata/")
	}
	for _, name := range fixture.Names() {
		out = append(out, tree{"fixture/" + name, testsupport.Root(t, testsupport.Fixture(t, name))})
	}
	return out
}

// run runs lspci on the tree with args and returns its standard output.
func run(bin, dir string, args ...string) (string, error) {
	base := []string{"-A", "linux-sysfs", "-O", "sysfs.path=" + filepath.Join(dir, "sys", "bus", "pci"), "-i", pciIDs, "-D"}
	cmd := exec.Command(bin, append(base, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("lspci %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// refused are the trees lspci cannot read at all, with the reason.
var refused = map[string]string{
	"fixture/malformed": "lspci gives up on the whole tree at a function without its vendor file " +
		"(pciutils lib/sysfs.c sysfs_scan); p2pcheck keeps the other functions and reports that one",
}

// machine is lspci's -vmm record of each function, field by field.
type machine map[pcie.Address]map[string]string

// parseMachine reads `lspci -vmm` output: blocks of "Field:\tvalue" lines.
func parseMachine(t *testing.T, out string) machine {
	t.Helper()
	m := machine{}
	var cur map[string]string
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		k, v, ok := strings.Cut(line, ":\t")
		if !ok {
			cur = nil
			continue
		}
		if k == "Slot" {
			a, err := pcie.ParseAddress(v)
			if err != nil {
				t.Fatalf("lspci -vmm slot %q: %v", v, err)
			}
			cur = map[string]string{}
			m[a] = cur
			continue
		}
		if cur != nil {
			cur[k] = v
		}
	}
	return m
}

// bracketID splits lspci -nn's "Name [8086]" into the name and the ID.
func bracketID(s string) (name, id string) {
	i := strings.LastIndex(s, " [")
	if i < 0 || !strings.HasSuffix(s, "]") {
		return s, ""
	}
	return s[:i], s[i+2 : len(s)-1]
}

// pathLine is one line of `lspci -PP`: the function, its parent (nil on a root bus)
// and its title, class and product names.
type pathLine struct {
	parent *pcie.Address
	title  string
}

var revSuffix = regexp.MustCompile(` \(rev [0-9a-f]{2}\)$`)

// parsePaths reads `lspci -D -PP`: "0000:00:01.0/01:00.0 Class: Vendor Device".
func parsePaths(t *testing.T, out string) map[pcie.Address]pathLine {
	t.Helper()
	m := map[pcie.Address]pathLine{}
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		path, title, _ := strings.Cut(line, " ")
		elems := strings.Split(path, "/")
		a, err := pcie.ParseAddress(elems[len(elems)-1])
		if err != nil {
			t.Fatalf("lspci -PP %q: %v", line, err)
		}
		// Elements after the first omit the domain; it is the first's.
		a.Domain = testsupport.Addr(t, elems[0]).Domain
		pl := pathLine{title: revSuffix.ReplaceAllString(title, "")}
		if len(elems) > 1 {
			p := testsupport.Addr(t, elems[len(elems)-2])
			p.Domain = a.Domain
			pl.parent = &p
		}
		m[a] = pl
	}
	return m
}

// verbose is what the test reads of one function in `lspci -vvv`.
type verbose struct {
	lnkCap, lnkSta string // "Speed 16GT/s, Width x16"
	downgraded     bool   // LnkSta has "(downgraded)"
	acsCtl         string // "SrcValid+ TransBlk- ..."
	mpsCap, mps    string // DevCap's and DevCtl's MaxPayload, "256" bytes
	regions        []string
}

var (
	regionLine = regexp.MustCompile(`^\tRegion (\d+): Memory at (\S+) \((32|64)-bit, (non-prefetchable|prefetchable)\)(.*)$`)
	sizeField  = regexp.MustCompile(`\[size=(\d+)([KMGT]?)\]`)
	linkFields = regexp.MustCompile(`Speed ([0-9.]+GT/s|unknown)[^,]*, Width x(\d+)`)
	// MaxPayload in DevCap and on DevCtl's third line (pciutils ls-caps.c
	// cap_express_dev: "MaxPayload %d bytes").
	payloadField = regexp.MustCompile(`^MaxPayload (\d+) bytes`)
)

// parseVerbose reads `lspci -vvv`: a header line per function, then indented lines.
func parseVerbose(t *testing.T, out string) map[pcie.Address]*verbose {
	t.Helper()
	m := map[pcie.Address]*verbose{}
	var cur *verbose
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if line == "" {
			continue
		}
		if line[0] != '\t' {
			addr, _, _ := strings.Cut(line, " ")
			cur = &verbose{}
			m[testsupport.Addr(t, addr)] = cur
			continue
		}
		if cur == nil {
			continue
		}
		field := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(field, "LnkCap:\t"):
			cur.lnkCap = linkText(field)
		case strings.HasPrefix(field, "LnkSta:\t"):
			cur.lnkSta = linkText(field)
			cur.downgraded = strings.Contains(field, "(downgraded)")
		case strings.HasPrefix(field, "ACSCtl:\t"):
			cur.acsCtl = strings.TrimPrefix(field, "ACSCtl:\t")
		case strings.HasPrefix(field, "DevCap:\t"):
			if f := payloadField.FindStringSubmatch(strings.TrimPrefix(field, "DevCap:\t")); f != nil {
				cur.mpsCap = f[1]
			}
		case payloadField.MatchString(field):
			cur.mps = payloadField.FindStringSubmatch(field)[1]
		}
		if r := regionLine.FindStringSubmatch(line); r != nil {
			cur.regions = append(cur.regions, region(r))
		}
	}
	return m
}

// linkText normalises a LnkCap or LnkSta line to "Speed 16GT/s, Width x16", or ""
// when lspci shows no link or an unknown one ("Speed unknown, Width x0").
func linkText(field string) string {
	f := linkFields.FindStringSubmatch(field)
	if f == nil || f[1] == "unknown" || f[2] == "0" {
		return ""
	}
	return "Speed " + f[1] + ", Width x" + f[2]
}

// region normalises a Region line to "0 80000000 32-bit non-prefetchable 16777216".
func region(r []string) string {
	size := "?"
	if s := sizeField.FindStringSubmatch(r[5]); s != nil {
		n, _ := strconv.ParseUint(s[1], 10, 64)
		shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[s[2]]
		size = strconv.FormatUint(n<<shift, 10)
	}
	return strings.Join([]string{r[1], r[2], r[3] + "-bit", r[4], size}, " ")
}

// ourRegion formats a p2pcheck BAR as region does lspci's.
func ourRegion(r pcie.Resource) string {
	bits, pf := "32-bit", "non-prefetchable"
	if r.Is64() {
		bits = "64-bit"
	}
	if r.Prefetchable() {
		pf = "prefetchable"
	}
	return strings.Join([]string{strconv.Itoa(r.Index), strconv.FormatUint(r.Start, 16), bits, pf, strconv.FormatUint(r.Size(), 10)}, " ")
}

// lspciSpeed is lspci's LnkSta speed word (pciutils ls-caps.c link_speed).
var lspciSpeed = map[pcie.LinkSpeed]string{1: "2.5GT/s", 2: "5GT/s", 3: "8GT/s", 4: "16GT/s", 5: "32GT/s", 6: "64GT/s"}

func ourLink(l pcie.Link) string {
	if !l.Known() {
		return ""
	}
	return "Speed " + lspciSpeed[l.Speed] + ", Width x" + strconv.Itoa(l.Width)
}

// orWord is name, or the word lspci -nn prints for a name pci.ids lacks.
func orWord(name, unknown string) string {
	if name != "" {
		return name
	}
	return unknown
}

// difference is one fact on which lspci and p2pcheck disagree.
type difference struct {
	field, lspci, ours string
}

// deliberate says why a difference is expected, or "" when it is a bug. Each case
// is a fact p2pcheck reads that lspci cannot, or reads differently on purpose.
func (c *comparison) deliberate(d *pcie.Device, diff difference) string {
	switch diff.field {
	case "driver":
		link := filepath.Join(c.dir, "sys", "bus", "pci", "devices", d.Address.String(), "driver")
		if _, err := os.Stat(link); diff.lspci == "" && errors.Is(err, fs.ErrNotExist) {
			// The snapshot writer should capture the (empty) driver directories.
			return "the snapshot lacks sys/bus/pci/drivers/<driver>/: lspci resolves the driver link " +
				"(pciutils lib/sysfs.c sysfs_deref_link, realpath), p2pcheck reads the link's last element"
		}
	case "link current", "link max":
		if diff.lspci == "" && d.Config != nil && d.Config.Express == nil {
			// Without the PCI Express capability in what config space gave (64 bytes
			// for an unprivileged reader), lspci shows no link at all.
			return "p2pcheck reads the link attributes (current_link_speed, max_link_width, ...), which need no privilege; lspci reads only config space"
		}
	}
	return ""
}

func TestLspci(t *testing.T) {
	bin := lspci(t)
	db, err := pciids.Load(nil, pciIDs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trees(t) {
		t.Run(tr.name, func(t *testing.T) {
			n := testnode.Root(t, tr.dir, node.Options{PCIIDs: pciIDs, NoPlatform: true})
			var outs [3]string
			for i, args := range [][]string{{"-vmm", "-nn", "-k"}, {"-PP"}, {"-vvv"}} {
				out, err := run(bin, tr.dir, args...)
				why, isRefused := refused[tr.name]
				switch {
				case err != nil && isRefused:
					t.Logf("expected: %s", why)
					return
				case err != nil:
					t.Fatal(err)
				case isRefused:
					t.Fatalf("lspci reads %s now; remove it from refused", tr.name)
				}
				outs[i] = out
			}
			c := comparison{db: db, dir: tr.dir, top: n.Topology, vmm: parseMachine(t, outs[0]),
				paths: parsePaths(t, outs[1]), verb: parseVerbose(t, outs[2])}
			c.run(t)
		})
	}
}

// comparison is one tree as p2pcheck and lspci see it.
type comparison struct {
	db    *pciids.DB
	dir   string
	top   *pcie.Topology
	vmm   machine // -vmm -nn -k
	paths map[pcie.Address]pathLine
	verb  map[pcie.Address]*verbose
}

// run checks every function of the tree against lspci's records.
func (c *comparison) run(t *testing.T) {
	t.Helper()
	db, top, vmm, paths, verb := c.db, c.top, c.vmm, c.paths, c.verb
	var theirs, ours []pcie.Address
	for a := range vmm {
		theirs = append(theirs, a)
	}
	for _, d := range top.Devices {
		ours = append(ours, d.Address)
	}
	slices.SortFunc(theirs, pcie.Address.Compare)
	if !slices.Equal(theirs, ours) {
		t.Fatalf("function sets differ:\nlspci    %v\np2pcheck %v", theirs, ours)
	}
	expected := map[string]int{}
	for _, d := range top.Devices {
		m, pl, v := vmm[d.Address], paths[d.Address], verb[d.Address]
		if v == nil {
			v = &verbose{}
		}
		var diffs []difference
		check := func(field, theirs, ours string) {
			if theirs != ours {
				diffs = append(diffs, difference{field, theirs, ours})
			}
		}
		// Parent: lspci -PP walks the bus numbers of the bridges above; p2pcheck the
		// sysfs path. A VF's path names its PF's parent.
		parent := ""
		if pl.parent != nil {
			parent = pl.parent.String()
		}
		ourParent := ""
		if d.Parent != nil {
			ourParent = d.Parent.Address.String()
		}
		check("parent", parent, ourParent)
		// -vmm -nn prints "Name [id]", and for a name pci.ids lacks "Vendor [1234]",
		// "Device [347a]", "Unknown vendor [1af4]" (pciutils lib/names.c format_name).
		vendor, vid := bracketID(m["Vendor"])
		device, did := bracketID(m["Device"])
		subVendor, svid := bracketID(m["SVendor"])
		subDevice, sdid := bracketID(m["SDevice"])
		_, cls := bracketID(m["Class"])
		check("vendor ID", vid, fmt.Sprintf("%04x", d.Vendor))
		check("device ID", did, fmt.Sprintf("%04x", d.Record.Device))
		check("class", cls, fmt.Sprintf("%04x", d.ClassCode()>>8))
		check("vendor name", vendor, orWord(d.VendorName, "Vendor"))
		// NVML names only GPUs, and p2pcheck was not given NVML facts here.
		check("device name", device, orWord(d.DeviceName, "Device"))
		if d.SubVendor != 0 && d.SubVendor != 0xffff {
			check("subsystem vendor ID", svid, fmt.Sprintf("%04x", d.SubVendor))
			check("subsystem device ID", sdid, fmt.Sprintf("%04x", d.SubDevice))
			check("subsystem vendor name", subVendor, orWord(db.Vendor(d.SubVendor), "Unknown vendor"))
			check("subsystem name", subDevice, orWord(d.SubsystemName, "Device"))
		}
		// The -PP line holds the class and product as lspci prints them without
		// -nn, which p2pcheck's titles follow.
		check("title", pl.title, className(d)+": "+pcie.ProductText(d.Vendor, d.Record.Device, d.VendorName, d.DeviceName))
		l := d.Link()
		check("link current", v.lnkSta, ourLink(l.Current))
		check("link max", v.lnkCap, ourLink(l.Max))
		down, _ := d.LinkDowngraded()
		check("downgraded", strconv.FormatBool(v.downgraded), strconv.FormatBool(down))
		acs := ""
		if a, _ := d.ACS(); a != nil {
			acs = pcie.ACSString(a.Control)
		}
		check("ACS control", v.acsCtl, acs)
		mpsCap, mps := "", ""
		if c := d.Config; c != nil && c.Express != nil && c.Express.MaxPayload != 0 {
			mpsCap, mps = strconv.Itoa(c.Express.MaxPayloadSupported), strconv.Itoa(c.Express.MaxPayload)
		}
		check("DevCap MaxPayload", v.mpsCap, mpsCap)
		check("DevCtl MaxPayload", v.mps, mps)
		var regions []string
		for _, r := range d.BARs() {
			if r.IsMem() {
				regions = append(regions, ourRegion(r))
			}
		}
		check("memory BARs", strings.Join(v.regions, "; "), strings.Join(regions, "; "))
		numa := ""
		if d.NUMANode != nil && *d.NUMANode != -1 {
			numa = strconv.Itoa(*d.NUMANode)
		}
		check("NUMA node", m["NUMANode"], numa)
		group := ""
		if d.IOMMUGroup != nil {
			group = strconv.Itoa(*d.IOMMUGroup)
		}
		check("IOMMU group", m["IOMMUGroup"], group)
		check("driver", m["Driver"], d.Driver)
		for _, diff := range diffs {
			if why := c.deliberate(d, diff); why != "" {
				expected[why]++
				continue
			}
			t.Errorf("%s %s: lspci %q, p2pcheck %q", d.Address, diff.field, diff.lspci, diff.ours)
		}
	}
	for why, n := range expected {
		t.Logf("%d expected difference(s): %s", n, why)
	}
}

// className is the class name p2pcheck prints (pci.ids with lspci's fallbacks).
func className(d *pcie.Device) string {
	if d.ClassName != "" {
		return d.ClassName
	}
	return pcie.ClassText(d.ClassCode(), "", "")
}

// TestLineLengthLikeLspci checks that a pci.ids line is read, and a database with a
// longer one refused, at the same length as lspci reads and refuses it.
func TestLineLengthLikeLspci(t *testing.T) {
	bin := lspci(t)
	dir := testsupport.Root(t, testsupport.Fixture(t, "dgx-h100"))
	for _, n := range []int{1000, 1022, 1023, 4000} {
		for _, end := range []string{"\n", ""} {
			name := strings.Repeat("x", n-len("\t2330  "))
			ids := filepath.Join(t.TempDir(), "pci.ids")
			if err := os.WriteFile(ids, []byte("10de  NVIDIA Corporation\n\t2330  "+name+end), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "-A", "linux-sysfs", "-O", "sysfs.path="+filepath.Join(dir, "sys", "bus", "pci"),
				"-i", ids, "-mm", "-d", "10de:2330")
			out, lspciErr := cmd.CombinedOutput()
			db, err := pciids.Load(nil, ids)
			switch {
			case (lspciErr == nil) != (err == nil):
				t.Errorf("a line of %d bytes (newline %q): lspci %v (%.60q), p2pkit %v", n, end, lspciErr, out, err)
			// lspci cuts a name that long to fit its output buffer: its start must show.
			case err == nil && !strings.Contains(string(out), name[:64]) || err == nil && db.Device(0x10de, 0x2330) != name:
				t.Errorf("a line of %d bytes: lspci named it %.60q, p2pkit %.60q", n, out, db.Device(0x10de, 0x2330))
			}
		}
	}
}
