package pcie

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// vpdOf builds VPD bytes: an Identifier String, a VPD-R item with the given
// keywords, and the End tag.
func vpdOf(name string, ro ...[2]string) []byte {
	var b bytes.Buffer
	b.WriteByte(vpdIDString)
	b.Write([]byte{byte(len(name)), byte(len(name) >> 8)})
	b.WriteString(name)
	var r bytes.Buffer
	for _, kv := range ro {
		r.WriteString(kv[0])
		r.WriteByte(byte(len(kv[1])))
		r.WriteString(kv[1])
	}
	b.WriteByte(vpdRO)
	b.Write([]byte{byte(r.Len()), byte(r.Len() >> 8)})
	b.Write(r.Bytes())
	b.WriteByte(vpdEndSmall)
	return b.Bytes()
}

func TestParseVPD(t *testing.T) {
	b := vpdOf("NVIDIA ConnectX-8 SuperNIC", [2]string{"PN", "900-9X81Q"}, [2]string{"SN", "MT2345X00001"},
		[2]string{"V3", "b6a1c3e0-1111-2222-3333-444455556666"}, [2]string{"RV", "\x00"})
	v, err := ParseVPD(b)
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != "NVIDIA ConnectX-8 SuperNIC" || v.Truncated {
		t.Errorf("name %q, truncated %v", v.Name, v.Truncated)
	}
	var keys []string
	for _, f := range v.RO {
		keys = append(keys, f.Key)
		if !bytes.Equal(b[f.Offset:f.Offset+len(f.Value)], f.Value) {
			t.Errorf("%s: offset %d does not hold the value", f.Key, f.Offset)
		}
	}
	if diff := cmp.Diff([]string{"PN", "SN", "V3", "RV"}, keys); diff != "" {
		t.Errorf("keywords (-want +got):\n%s", diff)
	}
	if sn, ok := v.Keyword("SN"); !ok || sn != "MT2345X00001" {
		t.Errorf("SN %q %v", sn, ok)
	}
	if _, ok := v.Keyword("V9"); ok {
		t.Error("V9 found")
	}
	// Cut inside the VPD-R item: what was read before is kept.
	v, err = ParseVPD(b[:40])
	if err != nil || !v.Truncated || v.Name == "" {
		t.Errorf("cut: %+v %v", v, err)
	}
	for _, bad := range [][]byte{nil, {0x78}, {0x01, 0x02}} {
		if _, err := ParseVPD(bad); !errors.Is(err, ErrInvalidVPD) {
			t.Errorf("ParseVPD(%x): %v", bad, err)
		}
	}
}

func FuzzParseVPD(f *testing.F) {
	f.Add(vpdOf("x", [2]string{"SN", "1"}))
	f.Add([]byte{0x82, 0xff, 0xff})
	f.Add([]byte{0x90, 0x03, 0x00, 'S', 'N', 0x09})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseVPD(b)
		if err != nil {
			return
		}
		for _, fs := range [][]VPDField{v.RO, v.RW} {
			for _, x := range fs {
				if len(x.Key) != 2 || x.Offset < 0 || x.Offset+len(x.Value) > len(b) || !bytes.Equal(b[x.Offset:x.Offset+len(x.Value)], x.Value) {
					t.Fatalf("field %+v out of place", x)
				}
			}
		}
	})
}
