package provision

import (
	"errors"
	"fmt"

	"github.com/p2pkit/p2pkit/sysfs"
)

// ErrReadBack is returned (wrapped) in a Done when a register read back after the
// write does not hold the planned value.
var ErrReadBack = errors.New("provision: register read back differs from the value written")

// Done is what Apply did for one action.
type Done struct {
	Action
	sysfs.ACSControlWrite
	// Err is why the action failed: the write was refused or failed, or the value
	// read back is not the planned one. Nil on success.
	Err error
}

// Apply performs the plan's runtime actions, in order, under root (the directory
// that stands for /), each a read-modify-write of ACS Control through sysfs config
// that sets the bits of the action's mask as planned and keeps every other bit, read
// back at once. It goes on after a failed action and returns one Done per action; ok
// is false when any failed.
func Apply(root string, p Plan) (done []Done, ok bool) {
	ok = true
	for _, a := range p.Actions {
		want := a.Planned & a.Mask
		w, err := sysfs.WriteACSControl(root, a.Device.Address, a.CapOffset, a.Mask, want)
		if err == nil && w.After&a.Mask != want {
			err = fmt.Errorf("%w: %s ACS Control %#04x, want %#04x in the bits of %#04x", ErrReadBack, a.Device.Address, w.After, want, a.Mask)
		}
		if err != nil {
			ok = false
		}
		done = append(done, Done{Action: a, ACSControlWrite: w, Err: err})
	}
	return done, ok
}
