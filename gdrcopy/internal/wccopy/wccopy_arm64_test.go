//go:build !purego

package wccopy

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestGates checks the arm64 feature gate against golang.org/x/sys/cpu.
func TestGates(t *testing.T) {
	if useNEON != cpu.ARM64.HasASIMD {
		t.Errorf("NEON gate %t disagrees with golang.org/x/sys/cpu's ASIMD %t", useNEON, cpu.ARM64.HasASIMD)
	}
	if to, from := Selected(); useNEON && (to != "neon" || from != "neon") {
		t.Errorf("Selected() = %s, %s with ASIMD", to, from)
	}
}
