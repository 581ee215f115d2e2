package procfs

import (
	"bytes"
	"compress/gzip"
	"testing"
)

func gz(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestKernelConfig(t *testing.T) {
	const version = "Linux version 6.1.0-28-amd64 (x@y) #1 SMP\n"
	const config = "#\n# Automatically generated file\nCONFIG_PCI=y\n# CONFIG_PCI_P2PDMA is not set\n" +
		"CONFIG_NVME_CORE=m\nCONFIG_LOCALVERSION=\"\"\n"
	tests := []struct {
		name       string
		entries    []entry
		wantSource string
		wantP2P    ConfigValue
		wantErr    bool
	}{
		{"proc config.gz", []entry{file("proc/config.gz", string(gz(t, "CONFIG_PCI_P2PDMA=y\n")))}, "/proc/config.gz", ConfigYes, false},
		{"boot config", []entry{file("proc/version", version), file("boot/config-6.1.0-28-amd64", config)},
			"/boot/config-6.1.0-28-amd64", ConfigNo, false},
		{"config.gz wins", []entry{file("proc/version", version), file("boot/config-6.1.0-28-amd64", config),
			file("proc/config.gz", string(gz(t, "CONFIG_PCI_P2PDMA=y\n")))}, "/proc/config.gz", ConfigYes, false},
		{"no config", []entry{file("proc/version", version)}, "", ConfigUnknown, false},
		{"nothing", []entry{directory("proc")}, "", ConfigUnknown, false},
		{"corrupt config.gz", []entry{file("proc/config.gz", "not gzip")}, "", ConfigUnknown, true},
	}
	for _, tt := range tests {
		dirFS, memFS := openBoth(t, tt.entries)
		for kind, fsys := range map[string]FS{"dir": dirFS, "snapshot": memFS} {
			k, err := fsys.KernelConfig()
			if (err != nil) != tt.wantErr || k.Source != tt.wantSource || k.Value("CONFIG_PCI_P2PDMA") != tt.wantP2P {
				t.Errorf("%s/%s: source %q P2PDMA %v err %v; want %q %v error %t", tt.name, kind,
					k.Source, k.Value("CONFIG_PCI_P2PDMA"), err, tt.wantSource, tt.wantP2P, tt.wantErr)
			}
		}
	}
	k := KernelConfig{Source: "/boot/config-x", Options: parseConfig([]byte(config))}
	for name, want := range map[string]ConfigValue{"CONFIG_PCI": ConfigYes, "CONFIG_NVME_CORE": ConfigModule,
		"CONFIG_PCI_P2PDMA": ConfigNo, "CONFIG_ABSENT": ConfigNo} {
		if got := k.Value(name); got != want {
			t.Errorf("Value(%q) = %v, want %v", name, got, want)
		}
	}
	if k.Options["CONFIG_LOCALVERSION"] != `""` {
		t.Errorf("CONFIG_LOCALVERSION = %q", k.Options["CONFIG_LOCALVERSION"])
	}
}
