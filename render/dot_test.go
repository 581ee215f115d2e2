package render

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"unicode"
)

// dotGraph is what parseDot found: node IDs with their attributes, and edges.
type dotGraph struct {
	nodes map[string]map[string]string
	edges [][2]string
	attrs map[[2]string]map[string]string
}

// parseDot parses the subset of the DOT language TopoDot writes
// (https://graphviz.org/doc/info/lang.html): one digraph of node, edge and
// attribute statements, IDs quoted or bare, attribute lists of ID=ID pairs. It
// rejects anything else, so it stands in for Graphviz where it is not installed.
func parseDot(src string) (*dotGraph, error) {
	toks, err := dotTokens(src)
	if err != nil {
		return nil, err
	}
	g := &dotGraph{nodes: map[string]map[string]string{}, attrs: map[[2]string]map[string]string{}}
	i := 0
	next := func() string {
		if i >= len(toks) {
			return ""
		}
		i++
		return toks[i-1]
	}
	expect := func(want string) error {
		if got := next(); got != want {
			return fmt.Errorf("token %d: got %q, want %q", i, got, want)
		}
		return nil
	}
	attrList := func() (map[string]string, error) {
		a := map[string]string{}
		if i >= len(toks) || toks[i] != "[" {
			return a, nil
		}
		next()
		for {
			k := next()
			if k == "]" {
				return a, nil
			}
			if !isDotID(k) {
				return nil, fmt.Errorf("token %d: attribute name %q", i, k)
			}
			if err := expect("="); err != nil {
				return nil, err
			}
			v := next()
			if !isDotID(v) {
				return nil, fmt.Errorf("token %d: attribute value %q", i, v)
			}
			a[k] = unquote(v)
			if i < len(toks) && (toks[i] == "," || toks[i] == ";") {
				next()
			}
		}
	}
	if err := expect("digraph"); err != nil {
		return nil, err
	}
	if i < len(toks) && toks[i] != "{" {
		next() // the graph's name
	}
	if err := expect("{"); err != nil {
		return nil, err
	}
	for {
		t := next()
		switch {
		case t == "}":
			if i != len(toks) {
				return nil, fmt.Errorf("text after the graph")
			}
			return g, nil
		case t == "graph" || t == "node" || t == "edge":
			if _, err := attrList(); err != nil {
				return nil, err
			}
		case isDotID(t):
			from := unquote(t)
			if i < len(toks) && toks[i] == "->" {
				next()
				to := next()
				if !isDotID(to) {
					return nil, fmt.Errorf("token %d: edge to %q", i, to)
				}
				a, err := attrList()
				if err != nil {
					return nil, err
				}
				e := [2]string{from, unquote(to)}
				g.edges = append(g.edges, e)
				g.attrs[e] = a
			} else {
				a, err := attrList()
				if err != nil {
					return nil, err
				}
				g.nodes[from] = a
			}
		default:
			return nil, fmt.Errorf("token %d: unexpected %q", i, t)
		}
		if i < len(toks) && toks[i] == ";" {
			next()
		}
	}
}

func dotTokens(src string) ([]string, error) {
	var toks []string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '"':
			j := i + 1
			for ; j < len(src) && src[j] != '"'; j++ {
				if src[j] == '\\' {
					j++
				}
				if j < len(src) && src[j] < 0x20 {
					return nil, fmt.Errorf("control byte %#x in a string", src[j])
				}
			}
			if j >= len(src) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, src[i:j+1])
			i = j + 1
		case strings.HasPrefix(src[i:], "->"):
			toks = append(toks, "->")
			i += 2
		case strings.ContainsRune("{}[];,=", rune(c)):
			toks = append(toks, string(c))
			i++
		case c == '_' || unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c)) || c == '.':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] == '.' || unicode.IsLetter(rune(src[j])) || unicode.IsDigit(rune(src[j]))) {
				j++
			}
			toks = append(toks, src[i:j])
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q at %d", c, i)
		}
	}
	return toks, nil
}

func isDotID(t string) bool {
	return t != "" && (t[0] == '"' || t[0] == '_' || t[0] == '.' || unicode.IsLetter(rune(t[0])) || unicode.IsDigit(rune(t[0]))) &&
		t != "digraph" && t != "graph" && t != "node" && t != "edge"
}

func unquote(t string) string {
	if len(t) >= 2 && t[0] == '"' {
		return strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(t[1 : len(t)-1])
	}
	return t
}

// TestTopoDot draws fixture machines: the graph parses (with Graphviz when it is
// installed), every edge joins declared nodes, VFs are folded, and links carry the
// kernel's verdict.
func TestTopoDot(t *testing.T) {
	tests := []struct {
		machine  string
		maxNodes int
	}{
		{"dgx-h100", 80},
		// 1,028 functions, 960 of them VFs: the picture stays small.
		{"large", 120},
		{"sriov-nic", 10},
	}
	dotBin, _ := exec.LookPath("dot")
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			n := loadMachine(t, tt.machine)
			var b bytes.Buffer
			if err := TopoDot(&b, n.Topology, n.P2P()); err != nil {
				t.Fatal(err)
			}
			g, err := parseDot(b.String())
			if err != nil {
				t.Fatalf("not DOT: %v\n%s", err, b.String())
			}
			if len(g.nodes) > tt.maxNodes {
				t.Errorf("%d nodes for %d functions, want at most %d", len(g.nodes), len(n.Topology.Devices), tt.maxNodes)
			}
			for _, e := range g.edges {
				if g.nodes[e[0]] == nil || g.nodes[e[1]] == nil {
					t.Errorf("edge %s -> %s joins an undeclared node", e[0], e[1])
				}
			}
			coloured := 0
			for _, a := range g.attrs {
				if a["color"] != "" {
					coloured++
				}
			}
			if len(n.Interesting()) > 1 && coloured == 0 {
				t.Error("no link carries a verdict")
			}
			if dotBin != "" {
				cmd := exec.Command(dotBin, "-Tsvg", "-o", "/dev/null")
				cmd.Stdin = &b
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("dot -Tsvg: %v\n%s", err, out)
				}
			}
		})
	}
}

// TestTopoDotVerdicts checks the colour of each link on the SR-IOV NIC node: the
// two PFs sit below one root port with ACS redirect, so the pair turns at the
// host bridge.
func TestTopoDotVerdicts(t *testing.T) {
	n := loadMachine(t, "sriov-nic")
	var b bytes.Buffer
	if err := TopoDot(&b, n.Topology, n.P2P()); err != nil {
		t.Fatal(err)
	}
	g, err := parseDot(b.String())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for e, a := range g.attrs {
		got[e[0]+" -> "+e[1]] = a["tooltip"]
	}
	for _, e := range []string{"0000:00:01.0 -> 0000:01:00.0", "0000:00:01.0 -> 0000:01:00.1"} {
		if got[e] == "" {
			t.Errorf("link %s has no verdict; links: %v", e, got)
		}
	}
	if strings.Contains(b.String(), "0000:01:00.2") {
		t.Error("a VF is drawn; VFs are folded into their PF")
	}
	if !strings.Contains(b.String(), `+16 VFs`) {
		t.Errorf("PF label does not count its VFs:\n%s", b.String())
	}
}

func TestDotString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             `"plain"`,
		"two\nlines":        `"two\nlines"`,
		`quote " and \ `:    `"quote \" and \\ "`,
		"esc\x1b[2J driver": `"esc\\x1b[2J driver"`,
	} {
		if got := dotString(in); got != want {
			t.Errorf("dotString(%q) = %s, want %s", in, got, want)
		}
	}
}
