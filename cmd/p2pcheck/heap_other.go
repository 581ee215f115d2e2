//go:build !linux

package main

import "github.com/p2pkit/p2pkit/hostfs"

// hugePagesForTree does nothing: transparent huge pages are Linux's.
func hugePagesForTree(hostfs.Root) {}

// hugePagesForArchive does nothing: transparent huge pages are Linux's.
func hugePagesForArchive(string) {}
