package node

import (
	"errors"
	"fmt"

	"github.com/p2pkit/p2pkit/internal/pciids"
	"github.com/p2pkit/p2pkit/pcie"
)

// annotate fills device names from the host's pci.ids (path, or the usual places
// when empty). A missing database is reported and leaves names empty.
func annotate(t *pcie.Topology, path string) error {
	db, err := pciids.Load(path)
	if errors.Is(err, pciids.ErrNoDatabase) && path == "" {
		return fmt.Errorf("device names unavailable: no pci.ids on this host (install the pci.ids, pciutils or hwdata package, or pass --pci-ids FILE): %w", err)
	}
	if err != nil {
		return err
	}
	pciids.Annotate(t, db)
	return nil
}
