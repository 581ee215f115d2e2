//go:build !linux

package main

// hugePagesFirst does nothing: transparent huge pages are Linux's.
func hugePagesFirst() {}
