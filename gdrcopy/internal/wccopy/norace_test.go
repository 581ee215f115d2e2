//go:build !race

package wccopy

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
