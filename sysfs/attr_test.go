package sysfs

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/pcie"
)

func TestParseHex(t *testing.T) {
	tests := []struct {
		in      string
		bits    int
		want    uint64
		wantErr bool
	}{
		{"0x10de\n", 16, 0x10de, false},
		{"0x030200\n", 24, 0x030200, false},
		{"0xa1\n", 8, 0xa1, false},
		{"0xFFFF", 16, 0xffff, false},
		{"0x10000\n", 16, 0, true},
		{"10de\n", 16, 0, true},
		{"0x\n", 16, 0, true},
		{"0x+1", 16, 0, true},
		{"0x-1", 16, 0, true},
		{"0xzz", 16, 0, true},
		{"", 16, 0, true},
	}
	for _, tt := range tests {
		got, err := parseHex([]byte(tt.in), tt.bits)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseHex(%q, %d) = %#x, %v; want %#x, error %t", tt.in, tt.bits, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseClass(t *testing.T) {
	got, err := parseClass([]byte("0x030200\n"))
	if err != nil || got != 0x030200 {
		t.Errorf("parseClass = %#x, %v; want 0x030200", got, err)
	}
	if _, err := parseClass([]byte("0x1030200\n")); err == nil {
		t.Error("parseClass accepted a class wider than 24 bits")
	}
}

func TestParseLinkSpeed(t *testing.T) {
	tests := []struct {
		in      string
		want    pcie.LinkSpeed
		wantErr bool
	}{
		{"2.5 GT/s PCIe\n", 1, false},
		{"5.0 GT/s PCIe\n", 2, false},
		{"8.0 GT/s PCIe\n", 3, false},
		{"16.0 GT/s PCIe\n", 4, false},
		{"32.0 GT/s PCIe\n", 5, false},
		{"64.0 GT/s PCIe\n", 6, false},
		{"128.0 GT/s PCIe\n", 7, false},
		// Before Linux 5.7.
		{"2.5 GT/s\n", 1, false},
		{"5 GT/s\n", 2, false},
		{"8 GT/s\n", 3, false},
		{"16 GT/s\n", 4, false},
		{"32 GT/s\n", 5, false},
		{"Unknown\n", 0, false},
		{"Unknown speed\n", 0, false},
		{"\n", 0, false},
		{"33 MHz PCI\n", 0, true},
		{"3.0 GT/s PCIe\n", 0, true},
		{"fast", 0, true},
	}
	for _, tt := range tests {
		got, err := parseLinkSpeed([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseLinkSpeed(%q) = %d, %v; want %d, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseLinkWidth(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"16\n", 16, false},
		{"1\n", 1, false},
		{"12\n", 12, false},
		{"32\n", 32, false},
		{"0\n", 0, false},   // link down
		{"63\n", 0, false},  // all-ones field
		{"255\n", 0, false}, // all-ones register
		{"3\n", 0, false},
		{"x16\n", 0, true},
		{"-1\n", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := parseLinkWidth([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseLinkWidth(%q) = %d, %v; want %d, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseNUMANode(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"-1\n", -1, false},
		{"0\n", 0, false},
		{"7\n", 7, false},
		{"-2\n", 0, true},
		{"node0\n", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := parseNUMANode([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseNUMANode(%q) = %d, %v; want %d, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseDecimalAndBool(t *testing.T) {
	if v, err := parseDecimal([]byte("8388608\n")); err != nil || v != 8<<20 {
		t.Errorf("parseDecimal = %d, %v", v, err)
	}
	for _, bad := range []string{"", "-1\n", "0x10\n", "1.5\n"} {
		if _, err := parseDecimal([]byte(bad)); err == nil {
			t.Errorf("parseDecimal(%q) succeeded", bad)
		}
	}
	for in, want := range map[string]bool{"0\n": false, "1\n": true} {
		if got, err := parseBool([]byte(in)); err != nil || got != want {
			t.Errorf("parseBool(%q) = %t, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "2\n", "yes\n"} {
		if _, err := parseBool([]byte(bad)); err == nil {
			t.Errorf("parseBool(%q) succeeded", bad)
		}
	}
}

func TestParseResource(t *testing.T) {
	const zero = "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
	tests := []struct {
		name       string
		in         string
		want       []pcie.Resource
		wantUnread []int
		wantErr    bool
	}{
		{
			name: "H200 BARs",
			in: "0x0000104002000000 0x0000104002ffffff 0x000000000014220c\n" + zero +
				"0x0000100000000000 0x0000103fffffffff 0x000000000014220c\n" + zero +
				"0x0000104000000000 0x0000104001ffffff 0x000000000014220c\n" + zero + zero,
			want: []pcie.Resource{
				{Index: 0, Start: 0x104002000000, End: 0x104002ffffff, Flags: 0x14220c},
				{Index: 2, Start: 0x100000000000, End: 0x103fffffffff, Flags: 0x14220c},
				{Index: 4, Start: 0x104000000000, End: 0x104001ffffff, Flags: 0x14220c},
			},
		},
		{name: "bridge window", in: strings.Repeat(zero, 13) + "0x000000000000e000 0x000000000000efff 0x0000000000000101\n",
			want: []pcie.Resource{{Index: 13, Start: 0xe000, End: 0xefff, Flags: 0x101}}},
		{name: "all unused", in: zero + zero},
		{name: "empty", in: ""},
		{name: "truncated line", in: "0x0000000000001000 0x00000", wantUnread: []int{0}, wantErr: true},
		{name: "two fields", in: "0x1000 0x1fff\n", wantUnread: []int{0}, wantErr: true},
		{name: "not hex", in: "1000 1fff 200\n", wantUnread: []int{0}, wantErr: true},
		{name: "end before start", in: "0x2000 0x1fff 0x200\n", wantUnread: []int{0}, wantErr: true},
		{name: "blank line inside", in: zero + "\n" + zero, wantUnread: []int{1}, wantErr: true},
		{
			name: "one malformed line keeps the others",
			in:   "0x1000 0x1fff 0x200\nbogus\n0x3000 0x3fff 0x200\n",
			want: []pcie.Resource{
				{Index: 0, Start: 0x1000, End: 0x1fff, Flags: 0x200},
				{Index: 2, Start: 0x3000, End: 0x3fff, Flags: 0x200},
			},
			wantUnread: []int{1},
			wantErr:    true,
		},
	}
	for _, tt := range tests {
		got, unread, err := parseResource([]byte(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v, want error %t", tt.name, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.wantUnread, unread); diff != "" {
			t.Errorf("%s unread lines (-want +got):\n%s", tt.name, diff)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"0-3,8-11\n", []int{0, 1, 2, 3, 8, 9, 10, 11}, false},
		{"0-31", seq(0, 31), false},
		{"5", []int{5}, false},
		{"0,2,4", []int{0, 2, 4}, false},
		{"", nil, false},
		{"3-1", nil, true},
		{"0-3,2", nil, true},
		{"a-b", nil, true},
		{"0-", nil, true},
		{"-1", nil, true},
		{"0-4000000000", nil, true},
		{"0-3:2/4", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseCPUList(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseCPUList(%q) err = %v, want error %t", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseCPUList(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func seq(lo, hi int) []int {
	var s []int
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

func TestParseCPUMask(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"ffffffff\n", seq(0, 31), false},
		{"ffffffff,00000000", seq(32, 63), false},
		{"00000001,00000003", []int{0, 1, 32}, false},
		{"0", nil, false},
		{"", nil, true},
		{"fffffffff", nil, true},
		{"ff,,ff", nil, true},
		{"xyz", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseCPUMask(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseCPUMask(%q) err = %v, want error %t", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseCPUMask(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseIOMMUDomainType(t *testing.T) {
	for _, tt := range []struct {
		in         string
		want       IOMMUDomainType
		translated bool
	}{
		{"identity\n", IOMMUIdentity, false},
		{"DMA\n", IOMMUDMA, true},
		{"DMA-FQ\n", IOMMUDMAFQ, true},
		{"blocked\n", IOMMUBlocked, false},
		{"unmanaged\n", IOMMUUnmanaged, false},
		{"unknown\n", IOMMUUnknown, false},
	} {
		got, err := parseIOMMUDomainType([]byte(tt.in))
		if err != nil || got != tt.want || got.Translated() != tt.translated {
			t.Errorf("parseIOMMUDomainType(%q) = %v (translated %t), %v", tt.in, got, got.Translated(), err)
		}
		if got.String()+"\n" != tt.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), strings.TrimSpace(tt.in))
		}
	}
	if _, err := parseIOMMUDomainType([]byte("dma\n")); err == nil {
		t.Error("parseIOMMUDomainType accepted \"dma\"")
	}
}

func FuzzParseHex(f *testing.F) {
	for _, s := range []string{"0x10de\n", "0x030200\n", "0xa1", "0x", "zz"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseHex(b, 24)
		if err != nil {
			return
		}
		if v >= 1<<24 {
			t.Fatalf("parseHex(%q, 24) = %#x, wider than 24 bits", b, v)
		}
		// Canonical output parses back to the same value.
		again, err := parseHex([]byte("0x"+strconv.FormatUint(v, 16)), 24)
		if err != nil || again != v {
			t.Fatalf("round trip of %#x: %#x, %v", v, again, err)
		}
	})
}

func FuzzParseLinkSpeed(f *testing.F) {
	for _, s := range []string{"32.0 GT/s PCIe\n", "8 GT/s\n", "Unknown\n", "2.5 GT/s"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseLinkSpeed(b)
		if err == nil && s > 7 {
			t.Fatalf("parseLinkSpeed(%q) = %d", b, s)
		}
		w, err := parseLinkWidth(b)
		if err == nil && w != 0 && !slices.Contains([]int{1, 2, 4, 8, 12, 16, 32}, w) {
			t.Fatalf("parseLinkWidth(%q) = %d", b, w)
		}
		n, err := parseNUMANode(b)
		if err == nil && n < -1 {
			t.Fatalf("parseNUMANode(%q) = %d", b, n)
		}
		_, _ = parseIOMMUDomainType(b)
		_, _ = parseBool(b)
		_, _ = parseDecimal(b)
	})
}

func FuzzParseResource(f *testing.F) {
	f.Add([]byte("0x0000104002000000 0x0000104002ffffff 0x000000000014220c\n0x0000000000000000 0x0000000000000000 0x0000000000000000\n"))
	f.Add([]byte(""))
	f.Add([]byte("0x1 0x0 0x0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, _, _ := parseResource(b)
		last := -1
		for _, r := range rs {
			if r.End < r.Start || r.Index <= last {
				t.Fatalf("parseResource(%q): bad resource %+v after index %d", b, r, last)
			}
			last = r.Index
		}
	})
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,8-11", "0", "", "ffffffff,00000000", "1-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, parse := range []func(string) ([]int, error){ParseCPUList, ParseCPUMask} {
			cpus, err := parse(s)
			if err != nil {
				continue
			}
			for i, c := range cpus {
				if c < 0 || c >= maxCPU || i > 0 && c <= cpus[i-1] {
					t.Fatalf("%q gave %v: not ascending CPU numbers below %d", s, cpus, maxCPU)
				}
			}
		}
	})
}

func TestParseAERTotal(t *testing.T) {
	cor := "RxErr 0\nBadTLP 37\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 37\n"
	tests := []struct {
		name, in, key string
		want          uint64
		wantErr       bool
	}{
		{"correctable", cor, "TOTAL_ERR_COR", 37, false},
		{"zero", "Undefined 0\nDLP 0\nTOTAL_ERR_FATAL 0\n", "TOTAL_ERR_FATAL", 0, false},
		{"other key", cor, "TOTAL_ERR_FATAL", 0, true},
		{"garbage count", "TOTAL_ERR_COR many\n", "TOTAL_ERR_COR", 0, true},
		{"empty", "", "TOTAL_ERR_COR", 0, true},
	}
	for _, tt := range tests {
		got, err := parseAERTotal([]byte(tt.in), tt.key)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: parseAERTotal = %d, %v; want %d, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseAERTotal(f *testing.F) {
	f.Add([]byte("BadTLP 37\nTOTAL_ERR_COR 37\n"))
	f.Add([]byte("TOTAL_ERR_COR 18446744073709551615"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseAERTotal(b, "TOTAL_ERR_COR")
		if err != nil && n != 0 {
			t.Fatalf("count %d returned with error %v", n, err)
		}
	})
}
