package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
)

// TestOutputsAgree: on every synthetic machine, the report, topo's text and topo's
// JSON say the same of each fact they share: a device's link (current and maximum
// generation and width), its NUMA node, lspci's "(downgraded)" mark, and the ACS
// redirect of every bridge acs_path names.
func TestOutputsAgree(t *testing.T) {
	for _, name := range fixture.Names() {
		if name == "large" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			root := machineRoot(t, name)
			_, topoJSON, _ := p2pcheck("--root", root, "--format", "json", "topo")
			_, topoText, _ := p2pcheck("--root", root, "--no-color", "topo")
			_, repJSON, _ := p2pcheck("--root", root, "--format", "json", "--require", "p2p,gdr,gdrcopy,nvme-p2p")
			var topo agreeTopo
			var rep agreeReport
			if err := json.Unmarshal([]byte(topoJSON), &topo); err != nil {
				t.Fatalf("topo JSON: %v", err)
			}
			if err := json.Unmarshal([]byte(repJSON), &rep); err != nil {
				t.Fatalf("report JSON: %v", err)
			}
			byAddr := map[string]int{}
			for i, d := range topo.Devices {
				byAddr[d.Address] = i
			}
			compareAgreeDevices(t, topo, rep, byAddr)
			checkDowngradedAgree(t, topo, topoText)
			checkACSAgree(t, topo, rep, byAddr)
		})
	}
}

// agreeTopo is what TestOutputsAgree reads of topo's JSON.
type agreeTopo struct {
	Devices []struct {
		Address  string `json:"address"`
		NUMANode *int   `json:"numa_node"`
		Link     *struct {
			Current, Max *struct {
				Generation int `json:"generation"`
				Width      int `json:"width"`
			}
			Downgraded *bool `json:"downgraded"`
		} `json:"link"`
		ACS *struct {
			Control string `json:"control"`
		} `json:"acs"`
	} `json:"devices"`
}

// agreeReport is what TestOutputsAgree reads of the report's JSON.
type agreeReport struct {
	Devices []struct {
		BDF      string `json:"bdf"`
		NUMANode *int   `json:"numa_node"`
		Link     *struct {
			CurrentGen   int `json:"current_gen"`
			CurrentWidth int `json:"current_width"`
			MaxGen       int `json:"max_gen"`
			MaxWidth     int `json:"max_width"`
		} `json:"link"`
	} `json:"devices"`
	Checks []struct {
		ID       string   `json:"id"`
		Status   string   `json:"status"`
		Subjects []string `json:"subjects"`
	} `json:"checks"`
}

// compareAgreeDevices: each device of the report has topo's NUMA node and link.
func compareAgreeDevices(t *testing.T, topo agreeTopo, rep agreeReport, byAddr map[string]int) {
	t.Helper()
	for _, d := range rep.Devices {
		i, ok := byAddr[d.BDF]
		if !ok {
			t.Errorf("report device %s is not in topo", d.BDF)
			continue
		}
		td := topo.Devices[i]
		if d.NUMANode != nil && (td.NUMANode == nil || *td.NUMANode != *d.NUMANode) {
			t.Errorf("%s: NUMA node %d in the report, %v in topo", d.BDF, *d.NUMANode, td.NUMANode)
		}
		if l := d.Link; l != nil && td.Link != nil && td.Link.Current != nil && td.Link.Max != nil {
			got := [4]int{td.Link.Current.Generation, td.Link.Current.Width, td.Link.Max.Generation, td.Link.Max.Width}
			if want := [4]int{l.CurrentGen, l.CurrentWidth, l.MaxGen, l.MaxWidth}; got != want {
				t.Errorf("%s: link %v in the report, %v in topo", d.BDF, want, got)
			}
		}
	}
}

// checkDowngradedAgree: the text marks "(downgraded)" exactly where the JSON says
// downgraded.
func checkDowngradedAgree(t *testing.T, topo agreeTopo, topoText string) {
	t.Helper()
	marked := downgradedInText(topoText)
	var want []string
	for _, d := range topo.Devices {
		if d.Link != nil && d.Link.Downgraded != nil && *d.Link.Downgraded {
			want = append(want, d.Address)
		}
	}
	slices.Sort(want)
	if !slices.Equal(marked, want) {
		t.Errorf("(downgraded) in topo text on %v, in topo JSON on %v", marked, want)
	}
}

// checkACSAgree: every bridge acs_path fails on redirects in topo's ACS Control.
func checkACSAgree(t *testing.T, topo agreeTopo, rep agreeReport, byAddr map[string]int) {
	t.Helper()
	for _, c := range rep.Checks {
		if c.ID != "acs_path" || c.Status != "fail" {
			continue
		}
		for _, s := range c.Subjects {
			i, ok := byAddr[s]
			if !ok || topo.Devices[i].ACS == nil {
				t.Errorf("acs_path names %s, which topo shows without ACS", s)
				continue
			}
			ctl, err := strconv.ParseUint(strings.TrimPrefix(topo.Devices[i].ACS.Control, "0x"), 16, 16)
			if err != nil || ctl&0x002c == 0 {
				t.Errorf("acs_path names %s, whose ACS Control in topo is %q", s, topo.Devices[i].ACS.Control)
			}
		}
	}
}

var bdfLine = regexp.MustCompile(`^[│├└─ ]*([0-9a-f]{4,5}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) `)

// downgradedInText returns the functions whose lines in topo's text carry
// "(downgraded)", sorted.
func downgradedInText(text string) []string {
	var out []string
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		if m := bdfLine.FindStringSubmatch(line); m != nil {
			cur = m[1]
		}
		if cur != "" && strings.Contains(line, "(downgraded)") && !slices.Contains(out, cur) {
			out = append(out, cur)
		}
	}
	slices.Sort(out)
	return out
}
