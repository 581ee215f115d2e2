//go:build race

package wccopy

const raceEnabled = true
