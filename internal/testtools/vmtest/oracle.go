package vmtest

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// oracleTag starts every line the P2PDMA test kernel prints: at boot, and again
// between "begin rerun=N" and "end" whenever p2poracle_rerun is written.
const oracleTag = "pci-p2pdma: p2poracle: "

// Verdict is one ordered pair as the kernel's calc_map_type_and_dist()
// (drivers/pci/p2pdma.c) decided it, or as p2pcheck's pairs JSON states it.
type Verdict struct {
	Provider pcie.Address
	Client   pcie.Address
	MapType  string // bus-addr, thru-host-bridge, not-supported, unknown
	Distance int
}

// String formats v as the oracle prints it.
func (v Verdict) String() string {
	return fmt.Sprintf("%s %s %s %d", v.Provider, v.Client, v.MapType, v.Distance)
}

// Oracle is the test kernel's whole report for one boot.
type Oracle struct {
	// CPUSupportsP2PDMA is the kernel's cpu_supports_p2pdma(): the AMD Zen rule.
	CPUSupportsP2PDMA bool
	Verdicts          []Verdict // in the order printed, self pairs included
}

// ParseOracle extracts the oracle's report from dmesg output. It is an error when the
// begin or end line is missing (the kernel is not the test kernel, or `p2poracle` was
// not on its command line, or the ring buffer overflowed), or when a line is
// malformed.
func ParseOracle(dmesg []byte) (Oracle, error) {
	var (
		o            Oracle
		begun, ended bool
		sc           = bufio.NewScanner(bytes.NewReader(dmesg))
		mapTypes     = map[string]bool{"bus-addr": true, "thru-host-bridge": true, "not-supported": true, "unknown": true}
		seen         = map[[2]pcie.Address]bool{}
	)
	for sc.Scan() {
		_, rest, ok := strings.Cut(sc.Text(), oracleTag)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		switch {
		case len(f) == 2 && f[0] == "begin":
			v, ok := strings.CutPrefix(f[1], "cpu_supports_p2pdma=")
			if !ok || (v != "0" && v != "1") || begun {
				return o, fmt.Errorf("vmtest: oracle: bad begin line %q", rest)
			}
			o.CPUSupportsP2PDMA, begun = v == "1", true
		case len(f) == 1 && f[0] == "end":
			if !begun || ended {
				return o, fmt.Errorf("vmtest: oracle: end line out of place")
			}
			ended = true
		case len(f) == 4:
			if !begun || ended {
				return o, fmt.Errorf("vmtest: oracle: verdict outside begin/end: %q", rest)
			}
			p, err1 := canonicalAddress(f[0])
			c, err2 := canonicalAddress(f[1])
			d, err3 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || err3 != nil || !mapTypes[f[2]] {
				return o, fmt.Errorf("vmtest: oracle: bad verdict line %q", rest)
			}
			if seen[[2]pcie.Address{p, c}] {
				return o, fmt.Errorf("vmtest: oracle: pair %s %s printed twice", p, c)
			}
			seen[[2]pcie.Address{p, c}] = true
			o.Verdicts = append(o.Verdicts, Verdict{Provider: p, Client: c, MapType: f[2], Distance: d})
		default:
			return o, fmt.Errorf("vmtest: oracle: unrecognised line %q", rest)
		}
	}
	if err := sc.Err(); err != nil {
		return o, fmt.Errorf("vmtest: oracle: %w", err)
	}
	if !begun || !ended {
		return o, fmt.Errorf("vmtest: oracle: report incomplete (begin %t, end %t)", begun, ended)
	}
	return o, nil
}

// Lines formats the report as the kernel printed it, without timestamps: the stable
// form kept in testdata/vm.
func (o Oracle) Lines() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%sbegin cpu_supports_p2pdma=%d\n", oracleTag, boolInt(o.CPUSupportsP2PDMA))
	for _, v := range o.Verdicts {
		fmt.Fprintf(&b, "%s%s\n", oracleTag, v)
	}
	fmt.Fprintf(&b, "%send\n", oracleTag)
	return b.Bytes()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WithVFs adds verdicts for SR-IOV VFs enabled after boot, which the oracle (a
// late_initcall) never saw. calc_map_type_and_dist() walks up from a VF through
// pci_upstream_bridge(), which replaces a VF by its PF (drivers/pci/p2pdma.c,
// include/linux/pci.h), so a VF's verdict against any function outside its PF's
// family is the PF's. That holds only when neither the PF nor the VF has an ACS
// capability (the kernel also checks the function it starts from); the caller must
// check that. Pairs within one family (VF-PF, VF-VF) stay unjudged. vfs maps each VF
// to its PF.
func (o Oracle) WithVFs(vfs map[pcie.Address]pcie.Address) Oracle {
	family := func(a pcie.Address) pcie.Address {
		if pf, ok := vfs[a]; ok {
			return pf
		}
		return a
	}
	out := Oracle{CPUSupportsP2PDMA: o.CPUSupportsP2PDMA, Verdicts: slices.Clone(o.Verdicts)}
	for vf, pf := range vfs {
		for _, v := range o.Verdicts {
			switch {
			case v.Provider == pf && family(v.Client) != pf:
				out.Verdicts = append(out.Verdicts, Verdict{vf, v.Client, v.MapType, v.Distance})
			case v.Client == pf && family(v.Provider) != pf:
				out.Verdicts = append(out.Verdicts, Verdict{v.Provider, vf, v.MapType, v.Distance})
			}
		}
	}
	slices.SortFunc(out.Verdicts, func(a, b Verdict) int {
		return cmp.Or(a.Provider.Compare(b.Provider), a.Client.Compare(b.Client))
	})
	return out
}

// ParseOracleRerun extracts the last report the test kernel printed on request
// (writing /sys/module/p2pdma/parameters/p2poracle_rerun): the lines from the last "begin rerun=N" to its "end",
// computed afresh by calc_map_type_and_dist() after whatever changed at run time.
func ParseOracleRerun(dmesg []byte) (Oracle, error) {
	lines := bytes.Split(dmesg, []byte("\n"))
	start := -1
	for i, l := range lines {
		if bytes.Contains(l, []byte(oracleTag+"begin rerun=")) {
			start = i
		}
	}
	if start < 0 {
		return Oracle{}, fmt.Errorf("vmtest: oracle: no rerun report")
	}
	// "begin rerun=N cpu_supports_p2pdma=X" becomes the boot report's begin line.
	_, rest, _ := bytes.Cut(lines[start], []byte(oracleTag+"begin rerun="))
	_, cpu, ok := bytes.Cut(rest, []byte(" "))
	if !ok {
		return Oracle{}, fmt.Errorf("vmtest: oracle: bad rerun line %q", lines[start])
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%sbegin %s\n", oracleTag, cpu)
	for _, l := range lines[start+1:] {
		b.Write(l)
		b.WriteByte('\n')
		if bytes.HasSuffix(bytes.TrimSpace(l), []byte(oracleTag+"end")) {
			break
		}
	}
	return ParseOracle(b.Bytes())
}
