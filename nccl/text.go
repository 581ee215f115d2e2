package nccl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Text returns the report for people (see WriteText).
func (r *Report) Text() string {
	var b bytes.Buffer
	_ = r.WriteText(&b)
	return b.String()
}

// WriteText writes the report for people, decision by decision, so that its
// memory does not grow with the output.
func (r *Report) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "NCCL %s (%s)\n", r.NCCLVersion, r.VersionSource)
	if len(r.Settings) > 0 {
		b.WriteString("settings:\n")
		for _, s := range r.Settings {
			fmt.Fprintf(b, "  %s=%s (%s)\n", s.Name, s.Value, s.Source)
		}
	}
	b.WriteString("\nGPU pairs:\n")
	if len(r.GPUPairs) == 0 {
		b.WriteString("  none (fewer than two GPUs)\n")
	}
	for _, p := range r.GPUPairs {
		fmt.Fprintf(b, "  GPU%d -> GPU%d  %-4s %-6s via %s\n      %s\n", p.From, p.To, p.Path, p.Link, p.Via, p.Why)
		writeDetails(b, p.Assumed, p.Changes)
	}
	r.writeNets(b)
	fmt.Fprintf(b, "\nGDRCopy: %s: %s\n", r.GDRCopy.Use, r.GDRCopy.Why)
	for _, c := range r.GDRCopy.Changes {
		fmt.Fprintf(b, "      %s: %s\n", c.Setting, c.Effect)
	}
	b.WriteString("\nNCCL's path lines (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH):\n")
	for _, p := range r.Paths {
		b.WriteString("  " + strings.TrimRight(p, " ") + "\n")
	}
	r.writeRules(b)
	if len(r.Assumptions) > 0 {
		b.WriteString("\nassumed:\n")
		for _, a := range r.Assumptions {
			b.WriteString("  " + a + "\n")
		}
	}
	b.WriteString("\nnot modelled:\n")
	for _, n := range r.Notes {
		b.WriteString("  " + n + "\n")
	}
	return b.Flush()
}

func writeDetails(b *bufio.Writer, assumed []string, changes []Change) {
	for _, a := range assumed {
		b.WriteString("      assumed: " + a + "\n")
	}
	for _, c := range changes {
		fmt.Fprintf(b, "      %s: %s\n", c.Setting, c.Effect)
	}
}

func (r *Report) writeNets(b *bufio.Writer) {
	b.WriteString("\nnetwork devices:\n")
	if len(r.Nets) == 0 {
		b.WriteString("  none known\n")
	}
	for _, n := range r.Nets {
		where := n.BusID
		if where == "" {
			where = "not PCI: attached to the first CPU"
		}
		fmt.Fprintf(b, "  NET/%d %s (%s, %s) GPUDirect RDMA support %s: %s\n", n.Dev, n.Name, n.Plugin, where, n.GDR, n.Why)
	}
	if len(r.GPUNets) > 0 {
		b.WriteString("\nGPUDirect RDMA:\n")
	}
	for _, g := range r.GPUNets {
		fmt.Fprintf(b, "  GPU%d - NET/%d  %-4s recv %s, send %s: %s\n", g.GPU, g.Net, g.Path, g.Recv, g.Send, g.Why)
		writeDetails(b, g.Assumed, g.Changes)
		if len(g.Changes) == 0 && strings.HasPrefix(g.Why, "the network device") {
			b.WriteString("      no NCCL setting changes this: it needs an RDMA NIC (InfiniBand or RoCE) with nvidia-peermem loaded or DMA-BUF (open NVIDIA kernel modules, Linux 5.12+)\n")
		}
	}
}

// writeRules lists, once, the NCCL functions the decisions applied.
func (r *Report) writeRules(b *bufio.Writer) {
	var rules []string
	seen := map[string]bool{}
	add := func(rs []string) {
		for _, x := range rs {
			if !seen[x] {
				seen[x] = true
				rules = append(rules, x)
			}
		}
	}
	for _, p := range r.GPUPairs {
		add(p.Rules)
	}
	for _, g := range r.GPUNets {
		add(g.Rules)
	}
	add(r.GDRCopy.Rules)
	b.WriteString("\nNCCL's rules applied (" + r.Sources + "):\n")
	for _, x := range rules {
		b.WriteString("  " + x + "\n")
	}
}

// WriteJSON writes the report as json.MarshalIndent(r, "", "  ") does, followed
// by a newline, one decision at a time.
func (r *Report) WriteJSON(w io.Writer) error {
	b := bufio.NewWriter(w)
	b.WriteString("{\n")
	fields := []struct {
		key string
		v   any
	}{
		{"schema_version", r.SchemaVersion}, {"nccl_version", r.NCCLVersion}, {"version_source", r.VersionSource},
		{"sources", r.Sources}, {"settings", r.Settings}, {"gpus", r.GPUs}, {"nets", r.Nets}, {"paths", r.Paths},
		{"gpu_pairs", nil}, {"gpu_nets", nil},
		{"gdrcopy", r.GDRCopy}, {"assumptions", r.Assumptions}, {"notes", r.Notes},
	}
	for i, f := range fields {
		b.WriteString(`  "` + f.key + `": `)
		var err error
		switch f.key {
		case "gpu_pairs":
			err = writeArray(b, r.GPUPairs, r.GPUPairs == nil)
		case "gpu_nets":
			err = writeArray(b, r.GPUNets, r.GPUNets == nil)
		default:
			err = writeValue(b, f.v, "  ")
		}
		if err != nil {
			return err
		}
		if i < len(fields)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.Flush()
}

func writeValue(b *bufio.Writer, v any, prefix string) error {
	j, err := json.MarshalIndent(v, prefix, "  ")
	if err != nil {
		return err
	}
	_, err = b.Write(j)
	return err
}

func writeArray[T any](b *bufio.Writer, items []T, isNil bool) error {
	if isNil {
		b.WriteString("null")
		return nil
	}
	if len(items) == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteString("[\n")
	for i := range items {
		b.WriteString("    ")
		if err := writeValue(b, items[i], "    "); err != nil {
			return err
		}
		if i < len(items)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("  ]")
	return nil
}
