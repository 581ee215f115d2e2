package procfs

import (
	"io/fs"
	"testing"
)

// TestDevNodeLive reads the device number of /dev/null, character device 1:3 on
// every Linux system (Documentation/admin-guide/devices.txt).
func TestDevNodeLive(t *testing.T) {
	fsys, err := NewFS("/")
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	n, err := fsys.DevNode("null")
	if err != nil {
		t.Skipf("no /dev/null: %v", err)
	}
	if n.Mode&fs.ModeCharDevice == 0 || !n.NumberKnown || n.Major != 1 || n.Minor != 3 {
		t.Errorf("DevNode(null) = %+v, want character device 1:3", n)
	}
}
