package procfs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseModules(t *testing.T) {
	in := "nvidia_uvm 1830912 0 - Live 0xffffffffc080c000 (O)\n" +
		"nvidia 14299136 2 nvidia_uvm,nvidia_peermem, Live 0xffffffffc0400000 (POE)\n" +
		"gdrdrv 28672 - - Loading 0x0000000000000000\n"
	want := []Module{
		{Name: "nvidia_uvm", Size: 1830912, RefCount: 0, State: "Live", Taints: "O"},
		{Name: "nvidia", Size: 14299136, RefCount: 2, UsedBy: []string{"nvidia_uvm", "nvidia_peermem"}, State: "Live", Taints: "POE"},
		{Name: "gdrdrv", Size: 28672, RefCount: -1, State: "Loading"},
	}
	got, err := parseModules([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"nvidia 1 2\n", "nvidia x 0 - Live 0x0\n", "nvidia 1 -3 - Live 0x0\n"} {
		if _, err := parseModules([]byte(bad)); err == nil {
			t.Errorf("parseModules(%q) succeeded", bad)
		}
	}
	if got, err := parseModules(nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("no modules = %v, %v; want empty, not nil", got, err)
	}
}

func TestModulesLoaded(t *testing.T) {
	mods := Modules{{Name: "nvidia_peermem"}, {Name: "gdrdrv"}}
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"gdrdrv", true},
		{"nvidia_peermem", true},
		{"nvidia-peermem", true}, // kbuild's KBUILD_MODNAME has '_' for '-'
		{"nvidia", false},
		{"gdr", false},
	} {
		if got := mods.Loaded(tt.name); got != tt.want {
			t.Errorf("Loaded(%q) = %t, want %t", tt.name, got, tt.want)
		}
	}
	if Modules(nil).Loaded("gdrdrv") {
		t.Error("nil Modules has gdrdrv loaded")
	}
}
