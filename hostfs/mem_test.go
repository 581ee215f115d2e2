package hostfs_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/hostfs"
)

func TestMemBuilder(t *testing.T) {
	b := hostfs.DefaultBudget
	b.Members = 7 // the root, sys, sys/a, sys/a/f, sys/l, dev, dev/gdrdrv
	m := hostfs.NewMemBuilder(b)
	steps := []struct {
		name    string
		add     func() error
		wantErr string
	}{
		{"file and its parents", func() error { return m.File("sys/a/f", 0o644, []byte("one")) }, ""},
		{"replace a file", func() error { return m.File("sys/a/f", 0o600, []byte("two")) }, ""},
		{"directory over a file", func() error { return m.Dir("sys/a/f", 0o755) }, "share the name"},
		{"file under a file", func() error { return m.File("sys/a/f/g", 0o644, nil) }, "not a directory"},
		{"root as a file", func() error { return m.File(".", 0o644, nil) }, "root must be a directory"},
		{"link without target", func() error { return m.Symlink("sys/l", 0o777, "") }, "without a target"},
		{"link", func() error { return m.Symlink("sys/l", 0o777, "a/f") }, ""},
		{"device", func() error { return m.Device("dev/gdrdrv", 0o666, true, 509, 0) }, ""},
		{"one node too many", func() error { return m.Dir("x", 0o755) }, "Budget.Members"},
	}
	for _, s := range steps {
		err := s.add()
		if (err != nil) != (s.wantErr != "") || err != nil && !strings.Contains(err.Error(), s.wantErr) {
			t.Errorf("%s: err = %v, want %q", s.name, err, s.wantErr)
		}
	}
	r := m.Root()
	if got, err := r.ReadFile("sys/l", 16); err != nil || string(got) != "two" {
		t.Errorf("read through the link = %q, %v; want the replaced file", got, err)
	}
	fi, err := r.Lstat("dev/gdrdrv")
	want := hostfs.FileInfo{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, Major: 509, HasDev: true}
	if err != nil || fi != want {
		t.Errorf("Lstat(dev/gdrdrv) = %+v, %v; want %+v", fi, err, want)
	}
	var be *hostfs.BudgetError
	if err := m.Dir("y", 0o755); !errors.As(err, &be) || !errors.Is(err, hostfs.ErrBudget) || be.Limit != "Members" {
		t.Errorf("over Members: err = %v", err)
	}
}
