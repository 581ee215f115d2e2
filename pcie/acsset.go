package pcie

import (
	"encoding/binary"
	"slices"
)

// WithACSControl returns the tree t would be with ACS Control of the functions in
// control holding the values given: it rebuilds t from its functions' records with
// the ACS Control word of their config bytes changed, so the result is what reading
// the changed machine would give. A function whose ACS capability was not read, or
// that has none, keeps its record. t itself is not changed; with nothing to change,
// t is returned. Names from pci.ids are not carried over.
func (t *Topology) WithACSControl(control map[Address]uint16) *Topology {
	recs := make([]Record, len(t.Devices))
	changed := false
	for i, d := range t.Devices {
		recs[i] = d.Record
		ctl, ok := control[d.Address]
		acs, known := d.ACS()
		if !ok || !known || acs == nil || ctl == acs.Control {
			continue
		}
		at := int(acs.Offset) + 6
		if at+2 > len(d.Record.Config) {
			continue
		}
		recs[i].Config = slices.Clone(d.Record.Config)
		binary.LittleEndian.PutUint16(recs[i].Config[at:], ctl)
		changed = true
	}
	if !changed {
		return t
	}
	return NewTopology(recs)
}
