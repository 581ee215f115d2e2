package provision

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/p2pkit/p2pkit/internal/atomicfile"
	"github.com/p2pkit/p2pkit/pcie"
)

// StatePath is where `p2pcheck fix --apply` records the ACS Control bits it set,
// relative to the root: below /run, which starts empty at every boot as the runtime
// change itself does not survive one. The report's acs_drift check compares ACS
// Control with it and notices when the kernel restored a port (pci_restore_state()).
const StatePath = "run/p2pcheck/acs-applied.json"

// StateSchemaVersion is the version of the state file's format.
const StateSchemaVersion = "1"

// maxStateBytes bounds the state file a reader accepts.
const maxStateBytes = 1 << 20

// State is what one `fix --apply` set.
type State struct {
	SchemaVersion string       `json:"schema_version"`
	Kernel        string       `json:"kernel"` // the release it was set on
	Use           string       `json:"use"`    // bare-metal or virt-host
	Applied       []StateEntry `json:"applied"`
}

// StateEntry is one function's decided bits.
type StateEntry struct {
	Address pcie.Address `json:"address"`
	Mask    string       `json:"mask"`  // "0x002c"
	Value   string       `json:"value"` // the bits of mask, "0x0000"
}

// State returns the state to record after the plan's actions were applied.
func (p Plan) State() State {
	s := State{SchemaVersion: StateSchemaVersion, Kernel: p.Boot.Kernel.String(), Use: string(p.Mode), Applied: []StateEntry{}}
	for _, d := range p.Decided {
		s.Applied = append(s.Applied, StateEntry{Address: d.Address, Mask: hex16(d.Mask), Value: hex16(d.Value)})
	}
	return s
}

// WriteState writes s to StatePath below root (the directory that stands for /),
// creating run/p2pcheck if needed.
func WriteState(root string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	defer r.Close()
	if err := r.MkdirAll("run/p2pcheck", 0o755); err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	err = atomicfile.WriteIn(r, StatePath, atomicfile.Options{Force: true}, func(f *os.File) error {
		_, err := f.Write(append(b, '\n'))
		return err
	})
	if err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	return nil
}

// ParseState parses a state file and returns each entry's mask and value.
func ParseState(b []byte) (State, []Decision, error) {
	if len(b) > maxStateBytes {
		return State{}, nil, fmt.Errorf("provision: state file of %d bytes, more than %d", len(b), maxStateBytes)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, nil, fmt.Errorf("provision: state file: %w", err)
	}
	if s.SchemaVersion != StateSchemaVersion {
		return State{}, nil, fmt.Errorf("provision: state file schema %q, want %q", s.SchemaVersion, StateSchemaVersion)
	}
	out := make([]Decision, 0, len(s.Applied))
	for _, e := range s.Applied {
		m, err1 := strconv.ParseUint(e.Mask, 0, 16)
		v, err2 := strconv.ParseUint(e.Value, 0, 16)
		if err1 != nil || err2 != nil || v&^m != 0 {
			return State{}, nil, fmt.Errorf("provision: state file: %s: mask %q value %q", e.Address, e.Mask, e.Value)
		}
		out = append(out, Decision{Address: e.Address, Mask: uint16(m), Value: uint16(v)})
	}
	return s, out, nil
}
