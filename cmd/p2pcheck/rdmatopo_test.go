package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
)

// This file runs rdma-core's kernel-boot/rdma_topo (NVIDIA's GPUDirect ACS tool,
// Python 3) beside p2pcheck on fixtures of each shape rdma_topo knows: rdma_topo's
// check after `p2pcheck fix --apply` and the reboot with the parameter fix plans,
// and p2pcheck's verdict on rdma_topo's own plan. rdma_topo is not p2pkit's: it is
// read from ../shared/third_party/rdma_topo/ beside the module (P2PKIT_RDMA_TOPO
// names another copy), and the tests skip without it or python3 (they fail under
// CI=true).

// rdmaTopo returns python3 and the rdma_topo script.
func rdmaTopo(t *testing.T) (python, script string) {
	t.Helper()
	script = os.Getenv("P2PKIT_RDMA_TOPO")
	if script == "" {
		script = filepath.Join("..", "..", "..", "shared", "third_party", "rdma_topo", "rdma_topo")
	}
	python, err := exec.LookPath("python3")
	_, serr := os.Stat(script)
	if err != nil || serr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("rdma_topo needs python3 (%v) and its script %s (%v)", err, script, serr)
		}
		t.Skipf("rdma_topo needs python3 (%v) and its script %s (%v); P2PKIT_RDMA_TOPO names the script", err, script, serr)
	}
	return python, script
}

// runRDMATopo runs rdma_topo on the tree below root and returns its output and exit code.
func runRDMATopo(t *testing.T, root string, args ...string) (string, int) {
	t.Helper()
	python, script := rdmaTopo(t)
	cmd := exec.Command(python, append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "RDMA_TOPO_DEVDIR="+filepath.Join(root, "sys", "bus", "pci", "devices")+"/")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// acsOf reads ACS Control of every function with an ACS capability below root.
func acsOf(t *testing.T, root string) map[pcie.Address]uint16 {
	t.Helper()
	dir := filepath.Join(root, "sys", "bus", "pci", "devices")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[pcie.Address]uint16{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "config"))
		if err != nil {
			t.Fatal(err)
		}
		if c, err := pcie.ParseConfig(b); err == nil && c.ACS != nil {
			out[testsupport.Addr(t, e.Name())] = c.ACS.Control
		}
	}
	return out
}

// failLines returns rdma_topo check's FAIL lines, less the values they print.
func failLines(out string) []string {
	var fails []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "FAIL\t"); ok {
			fails = append(fails, l)
		}
	}
	return fails
}

// sideBySide is one fixture and use: p2pcheck's flag, rdma_topo's, and the FAIL
// lines of rdma_topo's check that remain after p2pcheck's plan, each with the
// source that says p2pcheck is right.
type sideBySide struct {
	machine     string
	build       func() *fixture.Machine
	fixFlag     string // --bare-metal, --virt-host, or "" (found by fix)
	use         provision.Mode
	rdmaTopo    []string // rdma_topo's mode flag
	differences []string // rdma_topo check FAIL lines (prefixes)
}

// inlineBareMetalDifferences are what rdma_topo's inline bare-metal plan ("xx000x0"
// on the root port, both ports of the shared switch and every other ConnectX port)
// wants and p2pcheck does not do:
//   - SV and UF stay set on the switch ports between NIC and GPU: the kernel's
//     P2PDMA test reads RR, CR and EC only (drivers/pci/p2pdma.c
//     pci_bridge_has_acs_redir), and its own P2P parameter clears exactly those three
//     (pci=disable_acs_redir=, drivers/pci/pci.c pci_enable_acs: mask
//     PCI_ACS_RR|PCI_ACS_CR|PCI_ACS_EC). Source Validation costs P2P nothing and
//     keeps a port checking requester IDs (docs/checks/acs_path.md).
//   - the root port above the shared switch keeps RR, CR and UF (p2pcheck clears
//     only SV there, so the kernel forms one IOMMU group of the segment, which
//     rdma_topo's group check wants): calc_map_type_and_dist() never reads ACS above
//     the common upstream bridge, and NIC-GPU traffic never reaches the root port.
var inlineBareMetalDifferences = []string{
	"ACS for generic_rp 0000:15:01.0 has incorrect values 0011100 != xx000x0",
	"ACS for cx_switch 0000:17:00.0 has incorrect values 0010001 != xx000x0",
	"ACS for cx_switch 0000:17:01.0 has incorrect values 0010001 != xx000x0",
	"ACS for cx_switch 0000:1a:00.0 has incorrect values 0010001 != xx000x0",
	"ACS for generic_rp 0000:37:01.0 has incorrect values 0011100 != xx000x0",
	"ACS for cx_switch 0000:39:00.0 has incorrect values 0010001 != xx000x0",
	"ACS for cx_switch 0000:39:01.0 has incorrect values 0010001 != xx000x0",
	"ACS for cx_switch 0000:3c:00.0 has incorrect values 0010001 != xx000x0",
}

var sideBySideCases = []sideBySide{
	{machine: "gb300-data-direct", build: fixture.GB300DataDirect, use: provision.ModeBareMetal},
	{machine: "hgx-inline", build: func() *fixture.Machine { return fixture.HGXInline(false) },
		use: provision.ModeBareMetal, rdmaTopo: []string{"--no-virt"}, differences: inlineBareMetalDifferences},
	{machine: "hgx-inline-ats", build: func() *fixture.Machine { return fixture.HGXInline(true) },
		use: provision.ModeVirtHost, rdmaTopo: []string{"--virt"}},
	{machine: "hgx-inline-ats", build: func() *fixture.Machine { return fixture.HGXInline(true) }, fixFlag: "--bare-metal",
		use: provision.ModeBareMetal, rdmaTopo: []string{"--no-virt"},
		// Asked for bare metal on a NIC with ATS: rdma_topo's check also wants the
		// ATS capability gone; that is the NIC's firmware (mlxconfig), which no ACS
		// plan changes.
		differences: append(slices.Clone(inlineBareMetalDifferences),
			"ATS capability for cx_nic 0000:18:00.0 is available", "ATS capability for cx_nic 0000:3a:00.0 is available")},
	{machine: "gb200-numa", build: fixture.GB200NUMA, use: provision.ModeBareMetal},
}

// valuesRE strips the values rdma_topo prints after the bits it compares.
var valuesRE = regexp.MustCompile(`, \(0x[0-9a-f]+ != 0x[0-9a-f]+\)$`)

// TestRDMATopoAfterFix: on each shape, `p2pcheck fix --apply` (and --persist: the
// reboot with its parameter is the fixture rebuilt with the values applied, its IOMMU
// groups formed from them), then rdma_topo's check on the result. It passes, or each
// FAIL line is one the case lists with the source that says p2pcheck is right.
func TestRDMATopoAfterFix(t *testing.T) {
	rdmaTopo(t)
	for _, tc := range sideBySideCases {
		t.Run(tc.machine+tc.fixFlag, func(t *testing.T) {
			root := testsupport.Root(t, tc.build())
			args := []string{"--root", root, "--no-nvml", "fix", "--apply", "--format", "json"}
			if tc.fixFlag != "" {
				args = append(args, tc.fixFlag)
			}
			code, out, errOut := p2pcheck(args...)
			rep := decodeFix(t, out)
			if code != 0 || rep.Result == provision.ResultNotFixed || rep.Use != string(tc.use) {
				t.Fatalf("fix --apply: exit %d, %s, use %s: %s\n%s", code, rep.Result, rep.Use, errOut, out)
			}
			applied := acsOf(t, root)
			// The boot parameter gives the applied values: a reboot with it is the
			// machine with them.
			for _, b := range rep.Persistent.Boot {
				if got := applied[b.Address]; fmt.Sprintf("0x%04x", got) != b.Control {
					t.Errorf("%s: applied %#04x, the parameter gives %s", b.Address, got, b.Control)
				}
			}
			if rep.Persistent.KernelParam == "" && len(rep.Actions) > 0 {
				t.Errorf("no boot parameter: %s", rep.Persistent.Reason)
			}
			booted := testsupport.Root(t, tc.build().SetACSControl(applied))
			out, code = runRDMATopo(t, booted, append([]string{"check"}, tc.rdmaTopo...)...)
			var fails []string
			for _, f := range failLines(out) {
				fails = append(fails, valuesRE.ReplaceAllString(f, ""))
			}
			if diff := cmp.Diff(tc.differences, fails); diff != "" {
				t.Errorf("rdma_topo check (exit %d): FAIL lines (-listed differences +got):\n%s\n%s", code, diff, out)
			}
			if len(tc.differences) == 0 && code != 0 {
				t.Errorf("rdma_topo check exit %d:\n%s", code, out)
			}
		})
	}
}

// setpciRE reads the commands `rdma_topo setpci-acs -n` prints.
var setpciRE = regexp.MustCompile(`^setpci -r -s (\S+) ECAP_ACS\+0x6\.w=([0-9a-f]{4})$`)

// TestP2PCheckOnRDMATopoPlan: rdma_topo's own plan (setpci-acs, applied by
// rebuilding the fixture with its values), judged by p2pcheck fix for the same use:
// on every shape p2pcheck has nothing to do. On the inline bare-metal plan every
// GPU-NIC pair is bus-addr; on the virtualization-host plan the NIC's port has
// Direct Translated P2P and isolation, which is p2pcheck's own plan; on Data Direct
// the asymmetric bits are p2pcheck's too.
func TestP2PCheckOnRDMATopoPlan(t *testing.T) {
	rdmaTopo(t)
	for _, tc := range sideBySideCases {
		if tc.fixFlag != "" {
			continue
		}
		t.Run(tc.machine, func(t *testing.T) {
			root := testsupport.Root(t, tc.build())
			out, code := runRDMATopo(t, root, append([]string{"setpci-acs", "-n"}, tc.rdmaTopo...)...)
			if code != 0 {
				t.Fatalf("setpci-acs: exit %d\n%s", code, out)
			}
			values := map[pcie.Address]uint16{}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				m := setpciRE.FindStringSubmatch(l)
				if l == "" {
					continue
				}
				if m == nil {
					t.Fatalf("setpci-acs printed %q", l)
				}
				v, _ := strconv.ParseUint(m[2], 16, 16)
				values[testsupport.Addr(t, m[1])] = uint16(v)
			}
			theirs := testsupport.Root(t, tc.build().SetACSControl(values))
			code, jout, errOut := p2pcheck("--root", theirs, "--no-nvml", "fix", "--format", "json")
			rep := decodeFix(t, jout)
			if code != 0 || rep.Result != provision.ResultNothingToDo || rep.Use != string(tc.use) {
				t.Errorf("p2pcheck fix on rdma_topo's plan: exit %d, %s, use %s, %d actions: %s", code, rep.Result, rep.Use, len(rep.Actions), errOut)
			}
			for _, p := range rep.Pairs {
				gpuNIC := strings.HasSuffix(p.Provider.String(), "18:00.0") && strings.HasSuffix(p.Client.String(), "1b:00.0")
				if tc.machine == "hgx-inline" && gpuNIC && p.Before.MapType != "bus-addr" {
					t.Errorf("%s -> %s: %s on rdma_topo's bare-metal plan", p.Provider, p.Client, p.Before.MapType)
				}
			}
		})
	}
}
