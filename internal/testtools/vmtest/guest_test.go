package vmtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/pcie"
)

// configSpace builds a 4096-byte config space: a PCI Express capability of port type
// pt at 0x40 (behind a power-management capability at 0x50 when chain is set), and
// the extended capabilities given as (offset, id) in list order, with ACS Control acs
// wherever id is 0x0d. A next pointer of the last extended capability equal to its
// own offset makes a loop.
func configSpace(pt pcie.PortType, chain bool, ext [][2]int, acs uint16, loop bool) []byte {
	b := make([]byte, 4096)
	binary.LittleEndian.PutUint16(b[0:], 0x1b36)
	binary.LittleEndian.PutUint16(b[2:], 0x000c)
	binary.LittleEndian.PutUint16(b[6:], 0x0010) // status: capability list
	expAt := 0x40
	if chain {
		b[0x34] = 0x50
		b[0x50], b[0x51] = 0x01, 0x40 // PM, next 0x40
	} else {
		b[0x34] = 0x40
	}
	b[expAt], b[expAt+1] = 0x10, 0x00
	binary.LittleEndian.PutUint16(b[expAt+2:], uint16(pt)<<4|2)
	for i, e := range ext {
		next := 0
		switch {
		case i+1 < len(ext):
			next = ext[i+1][0]
		case loop:
			next = e[0]
		}
		binary.LittleEndian.PutUint32(b[e[0]:], uint32(e[1])|1<<16|uint32(next)<<20)
		if e[1] == 0x0d {
			binary.LittleEndian.PutUint16(b[e[0]+4:], 0x005f)
			binary.LittleEndian.PutUint16(b[e[0]+6:], acs)
		}
	}
	return b
}

// walkerCase is one config space with the answers the guest's walkers and pcie's
// decoder must both give.
type walkerCase struct {
	name    string
	cfg     []byte
	wantACS string // "" without ACS
	wantExp string
}

// TestGuestWalkers runs the guest's busybox capability walkers (acsctl, exptype) on
// the host against config spaces whose answers are known, and against pcie's decoder:
// the busybox view is only an independent check if it reads the same registers.
// A looping extended capability list costs the walker its whole 480-step bound, two
// process launches a step; that case runs in the vmtest tier (TestGuestWalkerLoop).
func TestGuestWalkers(t *testing.T) {
	runWalkers(t, []walkerCase{
		{"root port, ACS after AER", configSpace(pcie.PortRootPort, false, [][2]int{{0x100, 0x01}, {0x148, 0x0d}}, 0x001d, false), "001d", "4"},
		{"downstream, no ACS", configSpace(pcie.PortDownstream, true, [][2]int{{0x100, 0x01}}, 0, false), "", "6"},
		{"ACS first, redirect off", configSpace(pcie.PortRootPort, false, [][2]int{{0x100, 0x0d}}, 0x0011, false), "0011", "4"},
		{"no extended capabilities", configSpace(pcie.PortUpstream, true, nil, 0, false), "", "5"},
	})
}

// runWalkers runs each case through the busybox walkers and pcie.ParseConfig. There is
// no time limit: the walkers are bounded by their step count, not by the clock.
func runWalkers(t *testing.T, tests []walkerCase) {
	t.Helper()
	bb := "/bin/busybox"
	if _, err := os.Stat(bb); err != nil {
		SkipOrFail(t, "no busybox to run the guest's shell functions: %v", err)
	}
	dir, bin := t.TempDir(), t.TempDir()
	// The guest's applets, not the host's coreutils: od's output format is what
	// the walkers parse.
	if out, err := exec.Command(bb, "--install", "-s", bin).CombinedOutput(); err != nil {
		t.Fatalf("busybox --install: %v: %s", err, out)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprint(i))
			if err := os.WriteFile(path, tt.cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			script := guestFuncs + fmt.Sprintf("echo \"acs=$(acsctl %s) exp=$(exptype %s)\"\n", path, path)
			cmd := exec.Command(bb, "sh", "-c", script)
			cmd.Env = []string{"PATH=" + bin}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			want := fmt.Sprintf("acs=%s exp=%s", tt.wantACS, tt.wantExp)
			if got := strings.TrimSpace(string(out)); got != want {
				t.Errorf("guest walkers: %q, want %q", got, want)
			}
			c, err := pcie.ParseConfig(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			pcieACS := ""
			if c.ACS != nil {
				pcieACS = fmt.Sprintf("%04x", c.ACS.Control)
			}
			if pcieACS != tt.wantACS || c.Express == nil || fmt.Sprint(int(c.Express.PortType)) != tt.wantExp {
				t.Errorf("pcie.ParseConfig disagrees: ACS %q, Express %+v", pcieACS, c.Express)
			}
		})
	}
}

func TestMachineTimeout(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "qemu")
	// exec replaces the shell, so the kill reaches the process that holds stdout.
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho booting\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := Machine{QEMU: fake, Timeout: 300 * time.Millisecond}.Run(context.Background())
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if string(out) != "booting\n" {
		t.Errorf("console %q, want what was printed before the kill", out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to stop the guest", d)
	}
}

func TestMachineFailure(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "qemu")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'qemu: bad device' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Machine{QEMU: fake, Timeout: 10 * time.Second}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "qemu: bad device") {
		t.Errorf("err = %v, want QEMU's stderr in it", err)
	}
}

func TestLimitedBuffer(t *testing.T) {
	b := limitedBuffer{max: 5}
	for _, s := range []string{"abc", "def", "ghi"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if b.String() != "abcde" {
		t.Errorf("kept %q, want %q", b.String(), "abcde")
	}
}
