package sysfs

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/p2pkit/p2pkit/hostfs"
)

func TestConfigMissing(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{hostfs.PathError("read", "sys/devices/pci0000:00/0000:00:01.0/config", fs.ErrNotExist), true},
		{hostfs.PathError("read", "sys/devices/pci0000:00/0000:00:01.0/config", fs.ErrPermission), false},
		{hostfs.PathError("read", "sys/devices/pci0000:00/0000:00:01.0/vendor", fs.ErrNotExist), false},
		{errors.New("config"), false},
	}
	for _, tt := range tests {
		if got := ConfigMissing(tt.err); got != tt.want {
			t.Errorf("ConfigMissing(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
