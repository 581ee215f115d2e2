package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/check"
)

func TestParseConfig(t *testing.T) {
	n := uint64(50)
	for _, tt := range []struct {
		name, in string
		req      []check.Capability
		aer      *uint64
		err      bool
	}{
		{"empty", "", nil, nil, false},
		{"comments and blanks", "# p2pcheck\n\n  # indented\n", nil, nil, false},
		{"require", "require = gdrcopy, p2p\n", []check.Capability{check.CapP2P, check.CapGDRCopy}, nil, false},
		{"both, CRLF", "require=nvme-p2p\r\naer-threshold = 50\r\n", []check.Capability{check.CapNVMeP2P}, &n, false},
		{"unknown capability", "require = p2p,rdma\n", nil, nil, true},
		{"empty require", "require =\n", nil, nil, true},
		{"unknown key", "requires = p2p\n", nil, nil, true},
		{"no equals", "require p2p\n", nil, nil, true},
		{"twice", "require = p2p\nrequire = gdr\n", nil, nil, true},
		{"zero threshold", "aer-threshold = 0\n", nil, nil, true},
		{"negative threshold", "aer-threshold = -1\n", nil, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig([]byte(tt.in))
			if (err != nil) != tt.err {
				t.Fatalf("parseConfig(%q) error = %v, want error %t", tt.in, err, tt.err)
			}
			if err != nil {
				if !errors.Is(err, errConfig) {
					t.Errorf("error %v does not wrap errConfig", err)
				}
				return
			}
			if diff := cmp.Diff([]any{tt.req, tt.aer}, []any{c.require, c.aerThreshold}); diff != "" {
				t.Errorf("require, aer-threshold (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"", "require = p2p,gdr\n", "aer-threshold = 100\n# x\n", "=\n", "require = ,,,\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := parseConfig([]byte(in))
		if err != nil {
			if !errors.Is(err, errConfig) {
				t.Errorf("error %v does not wrap errConfig", err)
			}
			return
		}
		if c.require != nil && len(c.require) == 0 {
			t.Errorf("require set but empty")
		}
		if c.aerThreshold != nil && *c.aerThreshold == 0 {
			t.Errorf("aer-threshold 0 accepted")
		}
	})
}

func TestReadConfig(t *testing.T) {
	dir := t.TempDir()
	if _, err := readConfig(nil, filepath.Join(dir, "absent.conf"), false); err != nil {
		t.Errorf("missing default config: %v, want no error", err)
	}
	if _, err := readConfig(nil, filepath.Join(dir, "absent.conf"), true); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing --config: %v, want ErrNotExist", err)
	}
	big := filepath.Join(dir, "big.conf")
	if err := os.WriteFile(big, []byte(strings.Repeat("#\n", int(kindConfig.Limit))), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readConfig(nil, big, true); !errors.Is(err, errConfig) {
		t.Errorf("oversized config: %v, want errConfig", err)
	}
}

// The tests never read the machine's own configuration file.
func init() { defaultConfig = "testdata/no-such-p2pcheck.conf" }

// TestParseConfigExpect: expect = takes what --expect takes, its value holding
// "=" itself; a bad one is an error naming the line.
func TestParseConfigExpect(t *testing.T) {
	c, err := parseConfig([]byte("require = p2p\nexpect = gpus=8, rdma-nics=8\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.expect == nil || c.expect.String() != "gpus=8,rdma-nics=8" {
		t.Errorf("expect = %v, want gpus=8,rdma-nics=8", c.expect)
	}
	for _, in := range []string{"expect = nics=2\n", "expect =\n", "expect = gpus=1\nexpect = gpus=2\n"} {
		if _, err := parseConfig([]byte(in)); !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "line ") {
			t.Errorf("parseConfig(%q) error = %v, want errConfig naming the line", in, err)
		}
	}
}
