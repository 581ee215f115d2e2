package procfs

import (
	"encoding/json"
	"testing"
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
