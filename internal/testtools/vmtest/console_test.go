package vmtest

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseConsole(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]Section
		done    bool
		wantErr string
	}{
		{
			name: "text and base64 among kernel noise",
			in: "[    1.0] kernel says hi\r\n" +
				"==P2PKIT-BEGIN uname text==\r\n6.12.117\r\n==P2PKIT-END uname 0==\r\n" +
				"[    2.0] nvme nvme0: noise outside a section\n" +
				"==P2PKIT-BEGIN blob base64==\nAAEC\n/w==\n==P2PKIT-END blob 3==\n" +
				"==P2PKIT-DONE==\r\n[    3.0] reboot: Power down\n",
			want: map[string]Section{
				"uname": {Name: "uname", Data: []byte("6.12.117\n"), Status: 0},
				"blob":  {Name: "blob", Data: []byte{0, 1, 2, 0xff}, Status: 3},
			},
			done: true,
		},
		{
			name: "empty section, no final marker",
			in:   "==P2PKIT-BEGIN x text==\n==P2PKIT-END x 127==\n",
			want: map[string]Section{"x": {Name: "x", Data: []byte{}, Status: 127}},
		},
		{name: "unclosed", in: "==P2PKIT-BEGIN x text==\nabc\n", wantErr: `section "x" not closed`},
		{name: "wrong end", in: "==P2PKIT-BEGIN x text==\n==P2PKIT-END y 0==\n", wantErr: "does not close"},
		{name: "end without begin", in: "==P2PKIT-END y 0==\n", wantErr: "does not close"},
		{name: "nested begin", in: "==P2PKIT-BEGIN x text==\n==P2PKIT-BEGIN y text==\n", wantErr: "not closed before"},
		{name: "bad encoding", in: "==P2PKIT-BEGIN x hex==\n==P2PKIT-END x 0==\n", wantErr: "bad begin marker"},
		{name: "bad status", in: "==P2PKIT-BEGIN x text==\n==P2PKIT-END x ok==\n", wantErr: "bad exit status"},
		{name: "bad base64", in: "==P2PKIT-BEGIN x base64==\n!!!\n==P2PKIT-END x 0==\n", wantErr: `section "x"`},
		{name: "twice", in: strings.Repeat("==P2PKIT-BEGIN x text==\n==P2PKIT-END x 0==\n", 2), wantErr: "printed twice"},
		{name: "done inside", in: "==P2PKIT-BEGIN x text==\n==P2PKIT-DONE==\n", wantErr: "before the final marker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConsole([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Done != tt.done {
				t.Errorf("Done = %t, want %t", c.Done, tt.done)
			}
			if len(c.Sections) != len(tt.want) {
				t.Errorf("%d sections, want %d: %v", len(c.Sections), len(tt.want), c.Sections)
			}
			for name, w := range tt.want {
				g := c.Sections[name]
				if g.Name != w.Name || g.Status != w.Status || !bytes.Equal(g.Data, w.Data) {
					t.Errorf("section %s = %+v, want %+v", name, g, w)
				}
			}
		})
	}
}

func TestInitScript(t *testing.T) {
	s := InitScript([]string{"echo 2 > /sys/x/sriov_numvfs"}, []Capture{
		{Name: "a", Shell: "echo 'quoted'"},
		{Name: "b.tar.gz", Shell: "p2pcheck snapshot -o /tmp/b", File: "/tmp/b"},
	})
	for _, want := range []string{
		"#!/bin/busybox sh\n",
		"mount -t sysfs sys /sys\n",
		"capture setup 'set -e\necho 2 > /sys/x/sriov_numvfs'\n",
		`capture a 'echo '\''quoted'\'''` + "\n",
		"capturefile b.tar.gz 'p2pcheck snapshot -o /tmp/b' '/tmp/b'\n",
		"echo " + markDone + "\npoweroff -f\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("init script lacks %q:\n%s", want, s)
		}
	}
	if a, b := strings.Index(s, "capture a "), strings.Index(s, "capturefile b.tar.gz"); a < 0 || b < a {
		t.Errorf("captures out of order:\n%s", s)
	}
}
