//go:build !linux

package main

import (
	"fmt"

	"github.com/p2pkit/p2pkit/gdrcopy"
)

// openHostMapping needs memfd_create, which only Linux has.
func openHostMapping(int) (*gdrcopy.Driver, *gdrcopy.Mapping, error) {
	return nil, nil, fmt.Errorf("host-memory mappings: %w", gdrcopy.ErrNotSupported)
}
