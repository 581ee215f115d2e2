package node

import (
	"github.com/p2pkit/p2pkit/internal/pciids"
	"github.com/p2pkit/p2pkit/pcie"
)

// annotate fills device names from the host's pci.ids (path, or the usual places
// when empty). A missing database is reported and leaves names empty.
func annotate(t *pcie.Topology, path string) error {
	db, err := pciids.Load(path)
	if err != nil {
		return err
	}
	pciids.Annotate(t, db)
	return nil
}
