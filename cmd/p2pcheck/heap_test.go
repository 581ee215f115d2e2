package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// gogc reads the GOGC in force.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestGrowHeapFirst checks that the first collection gives pacing back to GOGC=100,
// and that a GOGC from the environment is kept.
func TestGrowHeapFirst(t *testing.T) {
	if _, set := os.LookupEnv("GOGC"); set {
		t.Skip("GOGC is set: growHeapFirst leaves it alone")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	growHeapFirst()
	if got := gogc(); got != 800 {
		t.Fatalf("GOGC after growHeapFirst = %d, want 800", got)
	}
	runtime.GC()
	// The cleanup runs on its own goroutine after the collection.
	for deadline := time.Now().Add(10 * time.Second); gogc() != 100; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after a collection, want 100", gogc())
		}
	}

	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	growHeapFirst()
	if got := gogc(); got != 50 {
		t.Errorf("GOGC with GOGC=50 set = %d, want 50", got)
	}
}
