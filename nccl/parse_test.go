package nccl

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

func TestParseConf(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Setting
	}{
		{"plain", "NCCL_P2P_LEVEL=NVL\nNCCL_DEBUG=INFO\n", []Setting{{Name: "NCCL_P2P_LEVEL", Value: "NVL"}, {Name: "NCCL_DEBUG", Value: "INFO"}}},
		{"comment and no equals", "# NCCL_P2P_DISABLE=1\nnonsense\nNCCL_IB_HCA=mlx5", []Setting{{Name: "NCCL_IB_HCA", Value: "mlx5"}}},
		// setEnvFile trims nothing: spaces and a CR stay in the name and value.
		{"no trimming", "NCCL_A = 1\r\n", []Setting{{Name: "NCCL_A ", Value: " 1\r"}}},
		{"value with equals", "NCCL_X=a=b\n", []Setting{{Name: "NCCL_X", Value: "a=b"}}},
		{"first wins", "NCCL_X=1\nNCCL_X=2\n", []Setting{{Name: "NCCL_X", Value: "1"}}},
		{"empty name", "=1\n", nil},
		{"indented comment is a line", " #NCCL_X=1\n", []Setting{{Name: " #NCCL_X", Value: "1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ParseConf([]byte(tt.in))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestResolveSettings checks NCCL's precedence (src/misc/param.cc): --assume, then
// the environment, then NCCL_CONF_FILE (or ~/.nccl.conf), then /etc/nccl.conf.
func TestResolveSettings(t *testing.T) {
	env := map[string]string{"NCCL_P2P_LEVEL": "PIX", "NCCL_CONF_FILE": "/tmp/my.conf", "PATH": "/bin", "NCCL_VERSION": "2.28.3-1"}
	paths := ConfPaths(env, "/root")
	if diff := cmp.Diff([]string{"/tmp/my.conf", "/etc/nccl.conf"}, paths); diff != "" {
		t.Errorf("ConfPaths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/root/.nccl.conf", "/etc/nccl.conf"}, ConfPaths(map[string]string{"NCCL_CONF_FILE": ""}, "/root/")); diff != "" {
		t.Errorf("ConfPaths without NCCL_CONF_FILE (-want +got):\n%s", diff)
	}
	files := []ConfFile{
		{"/tmp/my.conf", []byte("NCCL_P2P_LEVEL=SYS\nNCCL_SHM_DISABLE=1\nNCCL_NET_GDR_LEVEL=PHB\n")},
		{"/etc/nccl.conf", []byte("NCCL_SHM_DISABLE=0\nNCCL_IB_DISABLE=1\nNCCL_NET_GDR_LEVEL=SYS\n")},
	}
	s := ResolveSettings(map[string]string{"NCCL_NET_GDR_LEVEL": "LOC"}, env, files)
	want := []Setting{
		{"NCCL_CONF_FILE", "/tmp/my.conf", SourceEnvironment},
		{"NCCL_IB_DISABLE", "1", "/etc/nccl.conf"},
		{"NCCL_NET_GDR_LEVEL", "LOC", SourceAssume},
		{"NCCL_P2P_LEVEL", "PIX", SourceEnvironment},
		{"NCCL_SHM_DISABLE", "1", "/tmp/my.conf"},
	}
	if diff := cmp.Diff(want, s.All()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSettingsInt(t *testing.T) {
	s := ResolveSettings(map[string]string{"NCCL_A": "0x10", "NCCL_B": "", "NCCL_C": "1x", "NCCL_D": "99999999999999999999", "NCCL_E": "-1", "NCCL_F": "010"}, nil, nil)
	for _, tt := range []struct {
		name string
		want int64
	}{{"NCCL_A", 16}, {"NCCL_B", 7}, {"NCCL_C", 1}, {"NCCL_D", 7}, {"NCCL_E", -1}, {"NCCL_F", 8}, {"NCCL_UNSET", 7}} {
		if got := s.Int(tt.name, 7); got != tt.want {
			t.Errorf("Int(%s) = %d; want %d", tt.name, got, tt.want)
		}
	}
}

func TestParseLevel(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want PathType
		ok   bool
	}{
		{"LOC", PathLOC, true}, {"NVL", PathNVL, true}, {"PIX", PathPIX, true}, {"PHB", PathPHB, true}, {"SYS", PathSYS, true},
		// Old numbering (levelsOldToNew): 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and up SYS.
		{"0", PathLOC, true}, {"1", PathPIX, true}, {"2", PathPXB, true}, {"3", PathPHB, true}, {"9", PathSYS, true}, {"99999999999999999999", PathSYS, true},
		{"NET", 0, false}, {"pix", 0, false}, {"", 0, false}, {"-1", 0, false},
	} {
		got, ok := ParseLevel(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestStrtoll(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ovf  bool
	}{
		{"0", 0, false}, {" 42abc", 42, false}, {"0x1F", 31, false}, {"0x", 0, false}, {"077", 63, false}, {"08", 0, false},
		{"-12", -12, false}, {"+7", 7, false}, {"9223372036854775807", math.MaxInt64, false},
		{"9223372036854775808", math.MaxInt64, true}, {"-9223372036854775808", math.MinInt64, false}, {"-9223372036854775809", math.MinInt64, true},
	} {
		got, ovf := strtoll(tt.in)
		if got != tt.want || ovf != tt.ovf {
			t.Errorf("strtoll(%q) = %d, %v; want %d, %v", tt.in, got, ovf, tt.want, tt.ovf)
		}
	}
	if got := busIDToInt64("0000:00:06.0"); got != 0x60 {
		t.Errorf("busIDToInt64 = %#x; want 0x60", got)
	}
	if got := busIDToInt64("0000:1a:00.0"); got != 0x1a000 {
		t.Errorf("busIDToInt64 = %#x; want 0x1a000", got)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]int{"400 Gb/sec (4X NDR)\n": 400000, "56 Gb/sec (4X FDR)": 56000, "2.5 Gb/sec (1X SDR)": 2500,
		"": 0, "fast": 0, "400 Mb/sec": 0, "-1 Gb/sec": 0, "1e9 Gb/sec": 0} {
		if got := ParseRate(in); got != want {
			t.Errorf("ParseRate(%q) = %d; want %d", in, got, want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Version
		ok   bool
	}{
		{"2.28.9", Version{2, 28, 9}, true}, {"2.28", Version{2, 28, 0}, true}, {"2.28.9-1", Version{2, 28, 9}, true},
		{"2.28.9+cuda13.0", Version{2, 28, 9}, true}, {"v2.28.9", Version{}, false}, {"2", Version{}, false}, {"", Version{}, false},
	} {
		got, err := ParseVersion(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// TestFindVersion scans library-like images, with the banner across the reader's
// chunk boundary and after a format string that is no version.
func TestFindVersion(t *testing.T) {
	banner := "NCCL version 2.28.9+cuda13.0\x00"
	for _, pad := range []int{0, 1, 1<<20 - 20, 1<<20 - 5, 1 << 20, 3<<20 + 7} {
		img := append(bytes.Repeat([]byte{0x7f}, pad), []byte("NCCL version %s\x00"+banner)...)
		v, ok, err := FindVersion(bytes.NewReader(img))
		if err != nil || !ok || v != (Version{2, 28, 9}) {
			t.Errorf("pad %d: %v, %v, %v", pad, v, ok, err)
		}
	}
	if _, ok, err := FindVersion(strings.NewReader("no banner here")); ok || err != nil {
		t.Errorf("found a version in a file without one (%v)", err)
	}
}

// TestXMLRoundTrip writes NCCL's own dumps back byte for byte.
func TestXMLRoundTrip(t *testing.T) {
	for _, f := range []string{"h200-1gpu-first/nccl-topo.xml", "h200-1gpu-first/nccl-graph.xml", "h200-1gpu/p2pcheck-topo.xml"} {
		raw, err := os.ReadFile(filepath.Join(testdata, f))
		if err != nil {
			t.Fatal(err)
		}
		n, err := ParseXML(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteXML(&b, n); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(raw), b.String()); diff != "" {
			t.Errorf("%s (-read +written):\n%s", f, diff)
		}
	}
}

func TestParseXMLRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"<system version=\"1\">",
		"<a/><b/>",
		"<system>text</system>",
		"<system " + strings.Repeat("a", 300) + "=\"1\"/>",
		strings.Repeat("<a>", maxXMLDepth+1) + strings.Repeat("</a>", maxXMLDepth+1),
		"<cpu a0=\"\" a1=\"\" a2=\"\" a3=\"\" a4=\"\" a5=\"\" a6=\"\" a7=\"\" a8=\"\" a9=\"\" b0=\"\" b1=\"\" b2=\"\" b3=\"\" b4=\"\" b5=\"\" b6=\"\"/>",
	} {
		if _, err := ParseXML(strings.NewReader(in)); err == nil {
			t.Errorf("ParseXML(%.40q) succeeded", in)
		}
	}
	for _, in := range []string{"<cpu/>", "<system version=\"2\"/>", "<system version=\"1\"><cpu numaid=\"0\"/></system>",
		"<system version=\"1\"><cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\"/></system>"} {
		n, err := ParseXML(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewSystem(n); err == nil {
			t.Errorf("NewSystem(%q) succeeded", in)
		}
	}
}

// TestParseLog reads the fixture logs and a few hand-made channel lines.
func TestParseLog(t *testing.T) {
	l := readLog(t, filepath.Join(testdata, "h200-1gpu-first/nccl-info.log"))
	if l.Version != (Version{2, 28, 9}) {
		t.Errorf("version %v", l.Version)
	}
	if diff := cmp.Diff(map[string]bool{"eth0": false}, l.NetGDR); diff != "" {
		t.Errorf("NetGDR (-want +got):\n%s", diff)
	}
	in := `host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
host:1:2 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via SHM/direct/direct
host:1:2 [1] NCCL INFO Channel 02/0 : 1[1] -> 0[0] [send] via NET/Socket/0
NCCL INFO Channel 03/0 : 0[0] -> 1[1] [receive] via NET/IB/1/GDRDMA
NCCL INFO GDRCOPY enabled library 2.4 driver 2.4
NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'
`
	l, err := ParseLog(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Channel{
		{From: 0, To: 1, Via: "P2P/CUMEM", Host: "host"},
		{From: 1, To: 0, Via: "SHM/direct/direct", ID: 1, Host: "host"},
		{From: 1, To: 0, Via: "NET/Socket/0", ID: 2, Side: "send", Host: "host"},
		{From: 0, To: 1, Via: "NET/IB/1/GDRDMA", ID: 3, Side: "receive", Host: "log"},
	}
	if diff := cmp.Diff(want, l.Channels); diff != "" {
		t.Errorf("channels (-want +got):\n%s", diff)
	}
	if !l.GDRCopy || !l.NetGDR["mlx5_0"] {
		t.Errorf("GDRCopy %v, NetGDR %v", l.GDRCopy, l.NetGDR)
	}
}

// TestConfPrecedence checks, on the device run of scripts/nccl-device-conf.sh,
// that p2pcheck resolved the same values NCCL read: NCCL_P2P_LEVEL from the file
// NCCL_CONF_FILE names (over /etc/nccl.conf), NCCL_GDRCOPY_ENABLE from the
// environment (over that file), NCCL_IGNORE_CPU_AFFINITY from /etc/nccl.conf; and
// that it predicted no GDRCopy where NCCL printed no "GDRCOPY enabled" line.
func TestConfPrecedence(t *testing.T) {
	dir := filepath.Join(testdata, "h200-1gpu-conf")
	l := readLog(t, filepath.Join(dir, "nccl-info-conf.log"))
	raw, err := os.ReadFile(filepath.Join(dir, "p2pcheck-nccl-conf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range r.Settings {
		got[s.Name] = s.Value
	}
	for _, name := range []string{"NCCL_P2P_LEVEL", "NCCL_GDRCOPY_ENABLE", "NCCL_IGNORE_CPU_AFFINITY"} {
		want, ok := l.Settings[name]
		if !ok {
			t.Errorf("NCCL did not report %s", name)
		}
		if got[name] != want {
			t.Errorf("%s = %q; NCCL read %q", name, got[name], want)
		}
	}
	if l.GDRCopy || r.GDRCopy.Use != "no" {
		t.Errorf("GDRCopy: NCCL %v, predicted %s", l.GDRCopy, r.GDRCopy.Use)
	}
}

// TestSchema validates every JSON the package and the device run produced against
// schema/nccl.v1.json, and checks that it rejects what it must.
func TestSchema(t *testing.T) {
	validate := testsupport.Schema(t, "../schema/nccl.v1.json")
	files, _ := filepath.Glob(filepath.Join(testdata, "golden", "*.json"))
	files = append(files, filepath.Join(testdata, "h200-1gpu", "p2pcheck-nccl.json"), filepath.Join(testdata, "h200-1gpu-conf", "p2pcheck-nccl-conf.json"))
	if len(files) < 2 {
		t.Fatal("no JSON to validate")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	good, err := os.ReadFile(filepath.Join(testdata, "golden", "h200-2gpu-default.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]string{
		{`"schema_version": "1"`, `"schema_version": "2"`},
		{`"transport": "P2P"`, `"transport": "NVLINK"`},
		{`"path": "NVL"`, `"path": "NV18"`},
		{`"use": "no"`, `"use": "maybe"`},
	} {
		b := strings.Replace(string(good), bad[0], bad[1], 1)
		if b == string(good) {
			t.Fatalf("%s not in the golden", bad[0])
		}
		if validate([]byte(b)) == nil {
			t.Errorf("schema accepts %s", bad[1])
		}
	}
}

func FuzzParseXML(f *testing.F) {
	for _, p := range []string{"h200-1gpu-first/nccl-topo.xml", "h200-1gpu/p2pcheck-topo.xml", "golden/dgx-h100.xml"} {
		if b, err := os.ReadFile(filepath.Join(testdata, p)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseXML(bytes.NewReader(b))
		if err != nil {
			return
		}
		var w bytes.Buffer
		_ = WriteXML(&w, n)
		if _, err := NewSystem(n); err == nil {
			_, _ = Predict(Input{Topology: n})
		}
	})
}

func FuzzParseConf(f *testing.F) {
	f.Add([]byte("NCCL_P2P_LEVEL=NVL\n# c\nx\n=1\nNCCL_A= b\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range ParseConf(b) {
			if s.Name == "" || strings.Contains(s.Name, "=") || strings.Contains(s.Value, "\n") {
				t.Fatalf("bad setting %q", s)
			}
		}
	})
}

func FuzzParseLog(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(testdata, "h200-1gpu/nccl-info.log")); err == nil {
		f.Add(b)
	}
	f.Add([]byte("NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseLog(bytes.NewReader(b))
	})
}

func FuzzParseVersion(f *testing.F) {
	f.Add("2.28.9+cuda13.0")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err == nil && (v.Major < 0 || v.Minor < 0 || v.Patch < 0) {
			t.Fatalf("%q: %v", s, v)
		}
		_, _, _ = FindVersion(strings.NewReader("NCCL version " + s))
	})
}

func FuzzStrtoll(f *testing.F) {
	f.Add("0x7fffffffffffffff")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = strtoll(s)
		_ = busIDToInt64(s)
		_, _ = ParseLevel(s)
	})
}

// TestSocketInterfaces follows ncclFindInterfaces (src/misc/socket.cc): ib* first,
// then anything but docker*, lo*, virbr*, then those; NCCL_SOCKET_IFNAME with '^'
// to exclude and '=' for exact names.
func TestSocketInterfaces(t *testing.T) {
	all := []Interface{{Name: "lo"}, {Name: "docker0"}, {Name: "eth0"}, {Name: "ens1f0"}, {Name: "ib0"}, {Name: "virbr0"}}
	names := func(ifs []Interface) []string {
		var out []string
		for _, i := range ifs {
			out = append(out, i.Name)
		}
		return out
	}
	for _, tt := range []struct {
		ifs    []Interface
		ifname string
		want   []string
	}{
		{all, "", []string{"ib0"}},
		{all[:4], "", []string{"eth0", "ens1f0"}},
		{all[:2], "", []string{"docker0"}},
		{all[:1], "", []string{"lo"}},
		{all, "eth", []string{"eth0"}},
		{all, "^eth,lo", []string{"docker0", "ens1f0", "ib0", "virbr0"}},
		{all, "=ens1", nil},
		{all, "=ens1f0", []string{"ens1f0"}},
		// A single character is ignored (strlen(env) > 1).
		{all, "e", []string{"ib0"}},
	} {
		s := Settings{}
		if tt.ifname != "" {
			s = s.With("NCCL_SOCKET_IFNAME", tt.ifname, SourceEnvironment)
		}
		if diff := cmp.Diff(tt.want, names(socketInterfaces(tt.ifs, s))); diff != "" {
			t.Errorf("%q: (-want +got):\n%s", tt.ifname, diff)
		}
	}
}
