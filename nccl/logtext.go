package nccl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the explanation as indented JSON.
func (r *LogReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the explanation for people.
func (r *LogReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "NCCL %s (%s); %s\n", r.NCCLVersion, r.VersionSource, r.Sources)
	fmt.Fprintf(b, "%d NCCL lines: %d explained or read below, %d NCCL prints that decide nothing p2pcheck explains, %d not understood", r.Lines, r.Lines-r.OtherLines-r.NotUndCount, r.OtherLines, r.NotUndCount)
	if r.Skipped > 0 {
		fmt.Fprintf(b, ", %d longer than p2pcheck reads", r.Skipped)
	}
	b.WriteString("\n")
	r.writeFacts(b)
	fmt.Fprintf(b, "\nprediction: %s\n", r.Topology)
	b.WriteString("\nchannels:\n")
	if len(r.Channels) == 0 {
		b.WriteString("  none (one rank, or NCCL_DEBUG_SUBSYS without INIT)\n")
	}
	for _, g := range r.Channels {
		fmt.Fprintf(b, "  %d -> %d%s via %s  (channel%s %s, %d line%s)\n", g.From, g.To, sideWord(g.Side), g.Via, plural(len(g.Channels)), ranges(g.Channels), g.Lines, plural(g.Lines))
		writeExplained(b, g.Why, g.Rules, g.Changes, g.Predicted, g.Agrees)
	}
	b.WriteString("\nGPU Direct RDMA:\n")
	if len(r.GDR) == 0 {
		b.WriteString("  no line (NCCL_DEBUG_SUBSYS=NET or GRAPH prints them)\n")
	}
	for _, g := range r.GDR {
		fmt.Fprintf(b, "  %q on %s\n", g.Line, g.Host)
		writeExplained(b, g.Why, g.Rules, g.Changes, g.Predicted, g.Agrees)
	}
	fmt.Fprintf(b, "\nGDRCopy: used %s: %s\n      rules: %s\n", yesNo(r.GDRCopy.Used), r.GDRCopy.Why, strings.Join(r.GDRCopy.Rules, ", "))
	r.writeComparison(b)
	writeList(b, "NCCL warned", r.Warnings, len(r.Warnings))
	writeList(b, "not understood (lines p2pcheck does not know; nothing is guessed from them)", r.NotUnderst, r.NotUndCount)
	writeList(b, "notes", r.Notes, len(r.Notes))
	return b.Flush()
}

func (r *LogReport) writeFacts(b *bufio.Writer) {
	if r.Plugin != "" {
		fmt.Fprintf(b, "network plugin: %s\n", r.Plugin)
	}
	if len(r.Settings) > 0 {
		b.WriteString("\nsettings NCCL printed:\n")
	}
	for _, s := range r.Settings {
		fmt.Fprintf(b, "  %s=%s: %s\n", s.Name, s.Value, s.Decides)
	}
	if len(r.Ranks) > 0 {
		b.WriteString("\nranks:\n")
	}
	for _, k := range r.Ranks {
		fmt.Fprintf(b, "  rank %d on %s: GPU busId %s (cudaDev %d, nvmlDev %d)\n", k.Rank, k.Host, k.BusID, k.CudaDev, k.NvmlDev)
	}
}

func (r *LogReport) writeComparison(b *bufio.Writer) {
	if r.PathLines != nil {
		fmt.Fprintf(b, "\npath lines of %s: %d as predicted, %d not\n", r.PathLines.Host, r.PathLines.Equal, r.PathLines.Different)
	}
	b.WriteString("\ndisagreements with the prediction:\n")
	if len(r.Disagree) == 0 {
		b.WriteString("  none\n")
	}
	for _, d := range r.Disagree {
		fmt.Fprintf(b, "  %s: NCCL %s, predicted %s\n      %s\n", d.What, d.NCCL, d.Predicted, d.Explanation)
	}
}

func writeExplained(b *bufio.Writer, why string, rules []string, changes []Change, predicted, agrees string) {
	b.WriteString("      " + why + "\n")
	if len(rules) > 0 {
		b.WriteString("      rules: " + strings.Join(rules, ", ") + "\n")
	}
	for _, c := range changes {
		fmt.Fprintf(b, "      %s: %s\n", c.Setting, c.Effect)
	}
	if predicted != "" {
		fmt.Fprintf(b, "      predicted: %s (agrees: %s)\n", predicted, agrees)
	}
}

func writeList(b *bufio.Writer, title string, items []string, total int) {
	if total == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s (%d):\n", title, total)
	for _, s := range items {
		b.WriteString("  " + s + "\n")
	}
	if total > len(items) {
		fmt.Fprintf(b, "  ... and %d more\n", total-len(items))
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ranges writes sorted channel numbers as ranges: "00-03, 05".
func ranges(ids []int) string {
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%02d-%02d", ids[i], ids[j]))
		} else {
			parts = append(parts, fmt.Sprintf("%02d", ids[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
