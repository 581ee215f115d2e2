package snapshot_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
)

// nicVPD builds a ConnectX-style VPD: name, PN, SN, V3, then RV with a right
// checksum, and the End tag.
func nicVPD(sn, v3 string) []byte {
	var ro bytes.Buffer
	for _, kv := range [][2]string{{"PN", "900-9X81Q-00CN"}, {"SN", sn}, {"V3", v3}} {
		ro.WriteString(kv[0])
		ro.WriteByte(byte(len(kv[1])))
		ro.WriteString(kv[1])
	}
	ro.WriteString("RV")
	ro.WriteByte(1)
	ro.WriteByte(0)
	name := "NVIDIA ConnectX-8 SuperNIC"
	b := []byte{0x82, byte(len(name)), 0}
	b = append(b, name...)
	b = append(b, 0x90, byte(ro.Len()), 0)
	b = append(b, ro.Bytes()...)
	var sum byte
	for _, x := range b[:len(b)-1] {
		sum += x
	}
	b[len(b)-1] = -sum
	return append(b, 0x78)
}

// TestVPDRedacted: a redacted capture keeps the VPD of NVIDIA networking functions
// with SN and V3 replaced by pseudonyms, equal where the values were (so the two
// functions of one board still match), the checksum right; another vendor's VPD is
// not captured.
func TestVPDRedacted(t *testing.T) {
	const sn, v3 = "MT2412X00042", "6f1c2e3a-0b4d-11ef-9a1b-0c42a1b2c3d4"
	devs := []string{"0000:03:00.0", "0000:03:00.1", "0000:04:00.0"}
	var entries []entry
	for i, a := range devs {
		dir := "sys/devices/pci0000:00/0000:00:01.0/" + a + "/"
		vendor, vpd := "0x15b3\n", nicVPD(sn, v3)
		if i == 2 {
			vendor, vpd = "0x8086\n", nicVPD("INTEL0001", v3)
		}
		entries = append(entries,
			symlink("sys/bus/pci/devices/"+a, "../../../devices/pci0000:00/0000:00:01.0/"+a),
			file(dir+"vendor", vendor), file(dir+"vpd", string(vpd)))
	}
	fsys, err := snapshot.Read(bytes.NewReader(tarGz(t, entries)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snapshot.WriteOptions(fsys, &buf, snapshot.Options{}); err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []*pcie.VPD
	for i, a := range devs {
		b, err := snap.ReadFile("sys/devices/pci0000:00/0000:00:01.0/"+a+"/vpd", pcie.MaxVPDSize)
		if i == 2 {
			if err == nil {
				t.Errorf("%s (vendor 8086): VPD captured", a)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		if strings.Contains(string(b), sn) || strings.Contains(string(b), v3) {
			t.Errorf("%s: serial kept: %q", a, b)
		}
		var sum byte
		for _, x := range b[:len(b)-1] {
			sum += x
		}
		if sum != 0 {
			t.Errorf("%s: VPD-R checksum wrong (sum %#x)", a, sum)
		}
		v, err := pcie.ParseVPD(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	s0, _ := got[0].Keyword("SN")
	s1, _ := got[1].Keyword("SN")
	u0, _ := got[0].Keyword("V3")
	u1, _ := got[1].Keyword("V3")
	pn, _ := got[0].Keyword("PN")
	if s0 != s1 || u0 != u1 || len(s0) != len(sn) || len(u0) != len(v3) || s0 == u0 || pn != "900-9X81Q-00CN" {
		t.Errorf("pseudonyms: SN %q %q, V3 %q %q, PN %q", s0, s1, u0, u1, pn)
	}
	if got[0].Name != "NVIDIA ConnectX-8 SuperNIC" {
		t.Errorf("name %q", got[0].Name)
	}
}
