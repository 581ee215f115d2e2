//go:build (amd64 || arm64) && !purego && !linux

package wccopy

// installFaultHandler reports that faults are not returned off Linux, whose
// signal frame faultHandler reads.
func installFaultHandler() bool { return false }
