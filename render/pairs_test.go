package render

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

func seqOf(pairs ...Pair) func(func(Pair) bool) {
	return func(yield func(Pair) bool) {
		for _, p := range pairs {
			if !yield(p) {
				return
			}
		}
	}
}

func TestPairsJSONContract(t *testing.T) {
	a := pcie.Address{Bus: 3}
	b := pcie.Address{Bus: 4}
	sw := pcie.Address{Bus: 2}
	pairs := []Pair{
		{Verdict: p2pdma.Verdict{Provider: a, Client: b, MapType: p2pdma.BusAddr, Distance: 4, Reason: "below a common bridge"}, PathType: "PIX"},
		{Verdict: p2pdma.Verdict{Provider: b, Client: a, MapType: p2pdma.ThruHostBridge, Distance: 4, ACSRedirect: []pcie.Address{sw},
			Reason: "ACS \"redirect\"\n", Fix: &p2pdma.Fix{Bridges: []pcie.Address{sw}}}, PathType: "PIX"},
	}
	var buf bytes.Buffer
	if err := PairsJSON(&buf, seqOf(pairs...)); err != nil {
		t.Fatal(err)
	}
	type fix struct {
		KernelParam string   `json:"kernel_param"`
		Setpci      []string `json:"setpci"`
	}
	type pair struct {
		Provider    string   `json:"provider"`
		Client      string   `json:"client"`
		MapType     string   `json:"map_type"`
		Distance    int      `json:"distance"`
		PathType    string   `json:"path_type"`
		ACSRedirect []string `json:"acs_redirect"`
		Reason      string   `json:"reason"`
		Fix         *fix     `json:"fix"`
	}
	var got struct {
		SchemaVersion string `json:"schema_version"`
		Pairs         []pair `json:"pairs"`
	}
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("output is not the contract's JSON: %v", err)
	}
	want := []pair{
		{"0000:03:00.0", "0000:04:00.0", "bus-addr", 4, "PIX", []string{}, "below a common bridge", nil},
		{"0000:04:00.0", "0000:03:00.0", "thru-host-bridge", 4, "PIX", []string{"0000:02:00.0"}, "ACS \"redirect\"\n",
			&fix{"pci=disable_acs_redir=0000:02:00.0", []string{"setpci -s 0000:02:00.0 ECAP_ACS+6.w=0000:002c"}}},
	}
	if got.SchemaVersion != PairsSchemaVersion {
		t.Errorf("schema_version = %q, want %q", got.SchemaVersion, PairsSchemaVersion)
	}
	if diff := cmp.Diff(want, got.Pairs); diff != "" {
		t.Errorf("pairs (-want +got):\n%s", diff)
	}
}

// TestPairsJSONReasonCache checks that a reason seen before is written again
// intact after the line buffer has been reused for other pairs.
func TestPairsJSONReasonCache(t *testing.T) {
	var pairs []Pair
	for i, r := range []string{"first reason", "second, longer reason", "first reason", "second, longer reason"} {
		pairs = append(pairs, Pair{Verdict: p2pdma.Verdict{Provider: pcie.Address{Bus: uint8(i)}, Reason: r}})
	}
	var buf bytes.Buffer
	if err := PairsJSON(&buf, seqOf(pairs...)); err != nil {
		t.Fatal(err)
	}
	var got struct{ Pairs []struct{ Reason string } }
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for i, p := range got.Pairs {
		if p.Reason != pairs[i].Reason {
			t.Errorf("pair %d reason %q, want %q", i, p.Reason, pairs[i].Reason)
		}
	}
}

func TestPairsJSONEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := PairsJSON(&buf, seqOf()); err != nil {
		t.Fatal(err)
	}
	var got struct{ Pairs []json.RawMessage }
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || got.Pairs == nil || len(got.Pairs) != 0 {
		t.Errorf("empty output %q: %v, %v", buf.String(), got.Pairs, err)
	}
}

// FuzzAppendJSONString checks the hand-written string encoder against
// encoding/json: both must decode to the same string.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl\x00\x1f\n", "ünïcödé ✓", "bad\xff\xfeutf8", "\xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ours := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(ours, &got); err != nil {
			t.Fatalf("appendJSONString(%q) = %s: not JSON: %v", s, ours, err)
		}
		std, _ := json.Marshal(s)
		var want string
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("appendJSONString(%q) decodes to %q, encoding/json's to %q", s, got, want)
		}
	})
}
