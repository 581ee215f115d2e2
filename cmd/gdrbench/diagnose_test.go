package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/gdrready"
	"github.com/p2pkit/p2pkit/procfs"
)

const (
	modulesWithGDRDrv = "nvidia_uvm 1961984 0 - Live 0x0000000000000000 (OE)\n" +
		"gdrdrv 24576 0 - Live 0x0000000000000000 (OE)\n" +
		"nvidia 14381056 1 nvidia_uvm,gdrdrv, Live 0x0000000000000000 (OE)\n"
	modulesWithout = "nvidia_uvm 1961984 0 - Live 0x0000000000000000 (OE)\n" +
		"nvidia 14381056 1 nvidia_uvm, Live 0x0000000000000000 (OE)\n"
	devicesWithGDRDrv = "Character devices:\n  1 mem\n195 nvidia\n235 gdrdrv\n507 nvidia-uvm\n\nBlock devices:\n  8 sd\n"
	devicesWithout    = "Character devices:\n  1 mem\n195 nvidia\n507 nvidia-uvm\n\nBlock devices:\n  8 sd\n"
)

// fakeRoot writes files (path relative to the root -> content) into a new
// directory and returns it.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestDiagnose(t *testing.T) {
	yes, no := true, false
	major := uint32(235)
	tests := []struct {
		name    string
		files   map[string]string
		openErr error
		want    readiness
	}{
		{
			name:    "nothing installed",
			files:   map[string]string{"proc/modules": modulesWithout, "proc/devices": devicesWithout},
			openErr: errors.New("open /dev/gdrdrv: no such file or directory"),
			want: readiness{
				Module:    &no,
				OpenError: "open /dev/gdrdrv: no such file or directory",
				Problems: []string{
					"the gdrdrv kernel module is not loaded (not in /proc/modules)",
					"/dev/gdrdrv does not exist",
				},
				Fix: gdrready.FixLoad,
			},
		},
		{
			name: "module loaded, no node (modprobe without the service)",
			files: map[string]string{
				"proc/modules": modulesWithGDRDrv, "proc/devices": devicesWithGDRDrv,
				"proc/driver/gdrdrv/params": "Version: 2.6\nUse persistent mapping: yes\n",
			},
			want: readiness{
				Module:   &yes,
				Major:    &major,
				Version:  "2.6",
				Problems: []string{"gdrdrv is loaded (major 235) but /dev/gdrdrv does not exist"},
				Fix:      "sudo mknod -m 666 /dev/gdrdrv c 235 0",
			},
		},
		{
			name: "node is a plain file",
			files: map[string]string{
				"proc/modules": modulesWithGDRDrv, "proc/devices": devicesWithGDRDrv, "dev/gdrdrv": "",
			},
			want: readiness{
				Module:   &yes,
				Major:    &major,
				Node:     &nodeInfo{Path: "/dev/gdrdrv", Mode: "-rw-r--r--"},
				Problems: []string{"/dev/gdrdrv is not a character device (mode -rw-r--r--)"},
				Fix:      "sudo rm /dev/gdrdrv && sudo mknod -m 666 /dev/gdrdrv c 235 0",
			},
		},
		{
			name:  "loaded without a major",
			files: map[string]string{"proc/modules": modulesWithGDRDrv, "proc/devices": devicesWithout},
			want: readiness{
				Module: &yes,
				Problems: []string{
					"gdrdrv is loaded but registered no character device in /proc/devices",
					"/dev/gdrdrv does not exist",
				},
				Fix: gdrready.FixNoMajor,
			},
		},
		{
			name:  "no /proc",
			files: map[string]string{"sys/.keep": ""},
			want: readiness{
				Problems: []string{
					"/proc/modules does not exist",
					"/dev/gdrdrv does not exist",
				},
				Fix: "run where /proc is mounted",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, err := procfs.NewFS(fakeRoot(t, tt.files))
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			got := diagnose(fsys, tt.openErr, 1000)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("diagnose (-want +got):\n%s", diff)
			}
			var text strings.Builder
			got.writeText(&text)
			for _, p := range tt.want.Problems {
				if !strings.Contains(text.String(), p) {
					t.Errorf("text output lacks %q:\n%s", p, text.String())
				}
			}
			if !strings.Contains(text.String(), "fix first: "+tt.want.Fix) {
				t.Errorf("text output lacks the fix:\n%s", text.String())
			}
		})
	}
}
