package procfs

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDevNodeName(t *testing.T) {
	_, memFS := openBoth(t, []entry{charDev("dev/gdrdrv", 509, 0)})
	for _, bad := range []string{"", "../proc/cmdline", ".."} {
		if _, err := memFS.DevNode(bad); err == nil {
			t.Errorf("DevNode(%q) succeeded", bad)
		}
	}
}

func TestConfigValueNames(t *testing.T) {
	got, err := json.Marshal([]ConfigValue{ConfigUnknown, ConfigNo, ConfigYes, ConfigModule})
	if err != nil {
		t.Fatal(err)
	}
	if want := `["unknown","n","y","m"]`; string(got) != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
}

func TestParseCharDevices(t *testing.T) {
	in := "Character devices:\n  1 mem\n195 nvidia\n195 nvidiactl\n231 infiniband_verbs\n" +
		"244 infiniband_verbs\n509 gdrdrv\n\nBlock devices:\n  7 loop\n259 blkext\n"
	got, err := parseCharDevices([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []CharDevice{{1, "mem"}, {195, "nvidia"}, {195, "nvidiactl"}, {231, "infiniband_verbs"},
		{244, "infiniband_verbs"}, {509, "gdrdrv"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for name, want := range map[string]uint32{"gdrdrv": 509, "infiniband_verbs": 231, "nvidia": 195} {
		if m, ok := LookupMajor(got, name); !ok || m != want {
			t.Errorf("LookupMajor(%q) = %d, %t; want %d", name, m, ok, want)
		}
	}
	if _, ok := LookupMajor(got, "loop"); ok {
		t.Error("LookupMajor found a block device")
	}
	if _, err := parseCharDevices([]byte("Character devices:\nxx mem\n")); err == nil {
		t.Error("parseCharDevices accepted a bad major")
	}
}
