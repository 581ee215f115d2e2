package vmtest

import (
	"strings"
	"testing"
)

func TestParsePCIDump(t *testing.T) {
	const good = "0000:01:00.0 pci0000:00/0000:00:02.0/0000:01:00.0 104c:8232 hdr=01 bus=010205 exp=5 acs=- group=4 numa=-1 physfn=-\n" +
		"0000:03:00.1 pci0000:00/0000:00:02.0/0000:03:00.1 1b36:0010 hdr=00 bus=000000 exp=0 acs=001d group=- numa=1 physfn=0000:03:00.0\n"
	v, err := ParsePCIDump([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`0000:01:00.0 pci0000:00 104c:8232 upstream parent="0000:00:02.0" bus=02-05`,
		`0000:03:00.1 pci0000:00 1b36:0010 endpoint parent="0000:00:02.0" physfn=0000:03:00.0`,
	}
	for i, f := range v.Funcs {
		if got := fmtFunc(f); got != want[i] {
			t.Errorf("func %d = %s, want %s", i, got, want[i])
		}
	}
	if f := v.Facts[v.Funcs[0].Addr]; f != (Facts{ACS: "", IOMMUGroup: 4, NUMANode: -1}) {
		t.Errorf("facts of %s = %+v", v.Funcs[0].Addr, f)
	}
	if f := v.Facts[v.Funcs[1].Addr]; f != (Facts{ACS: "001d", IOMMUGroup: -1, NUMANode: 1}) {
		t.Errorf("facts of %s = %+v", v.Funcs[1].Addr, f)
	}

	line := strings.Fields(strings.Split(good, "\n")[0])
	bad := map[string]func([]string){
		"short line":     func(f []string) { f[9] = "" },
		"bad address":    func(f []string) { f[0] = "01:00.0" },
		"path elsewhere": func(f []string) { f[1] = "pci0000:00/0000:00:02.0" },
		"bad exp":        func(f []string) { f[5] = "exp=x" },
		"bad hdr":        func(f []string) { f[3] = "hdr=zz" },
		"bridge bus":     func(f []string) { f[4] = "bus=01" },
		"bad group":      func(f []string) { f[7] = "group=x" },
		"bad numa":       func(f []string) { f[8] = "numa=" },
		"no equals":      func(f []string) { f[6] = "acs" },
	}
	for name, mutate := range bad {
		f := append([]string(nil), line...)
		mutate(f)
		if _, err := ParsePCIDump([]byte(strings.Join(f, " "))); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseTopoJSON(t *testing.T) {
	const doc = `{"switches":[{"upstream":"0000:01:00.0","downstream":["0000:02:01.0","0000:02:00.0"]}],
	"devices":[
	 {"address":"0000:00:02.0","host_bridge":"pci0000:00","parent":null,"vendor":"1b36","device":"000c",
	  "header_type":1,"bus_numbers":{"secondary":"01","subordinate":"04"},"port_type":"Root Port",
	  "numa_node":-1,"iommu_group":1,"acs":{"known":true,"present":true,"control":"0x001d"}},
	 {"address":"0000:00:1f.0","host_bridge":"pci0000:00","parent":null,"vendor":"8086","device":"2918",
	  "header_type":0,"port_type":null,"numa_node":-1,"acs":{"known":false}}]}`
	v, sw, err := ParseTopoJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(sw) != 1 || sw[0].Downstream[0] != "0000:02:00.0" {
		t.Errorf("switches %+v, want downstream ports sorted", sw)
	}
	if got := fmtFunc(v.Funcs[0]); got != `0000:00:02.0 pci0000:00 1b36:000c root-port parent="" bus=01-04` {
		t.Errorf("root port: %s", got)
	}
	if got := v.Facts[v.Funcs[0].Addr]; got != (Facts{ACS: "001d", IOMMUGroup: 1, NUMANode: -1}) {
		t.Errorf("root port facts %+v", got)
	}
	if got := v.Facts[v.Funcs[1].Addr]; got.ACS != "unknown" || got.IOMMUGroup != -1 || v.Funcs[1].Type != "pci" {
		t.Errorf("1f.0: %+v %+v", v.Funcs[1], got)
	}
	for name, in := range map[string]string{
		"not JSON":          `{`,
		"bridge, no buses":  `{"devices":[{"address":"0000:00:02.0","header_type":1}]}`,
		"malformed address": `{"devices":[{"address":"00:02.0"}]}`,
	} {
		if _, _, err := ParseTopoJSON([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
