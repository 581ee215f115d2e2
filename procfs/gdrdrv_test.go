package procfs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseKeyValues(t *testing.T) {
	in := "Version: 2.5\nBuilt for NVIDIA driver flavor: opensource\nUse persistent mapping: yes\n" +
		"dbg_enabled: 0\ninfo_enabled: 1\ngarbage line\n"
	want := map[string]string{
		"Version": "2.5", "Built for NVIDIA driver flavor": "opensource",
		"Use persistent mapping": "yes", "dbg_enabled": "0", "info_enabled": "1",
	}
	if diff := cmp.Diff(want, parseKeyValues([]byte(in))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
