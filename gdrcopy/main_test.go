//go:build linux

package gdrcopy

import (
	"fmt"
	"os"
	"slices"
	"testing"
)

// TestMain runs a child-process role when asked to (see hwchild_test.go),
// and otherwise runs the tests and fails if they leaked file descriptors.
func TestMain(m *testing.M) {
	if role := os.Getenv(childRoleEnv); role != "" {
		os.Exit(runChild(role))
	}
	// Start the runtime poller before taking the baseline: it keeps its
	// own descriptors open for the life of the process.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	before, listed := openFDs()
	code := m.Run()
	if fdCheckOff != "" {
		fmt.Fprintf(os.Stderr, "descriptor leak check skipped: %s\n", fdCheckOff)
		listed = false
	}
	if after, ok := openFDs(); listed && ok && code == 0 {
		if leaked := slices.DeleteFunc(after, func(fd string) bool { return slices.Contains(before, fd) }); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "leaked file descriptors: %v\n", describeFDs(leaked))
			code = 99
		}
	}
	os.Exit(code)
}

// fdCheckOff, once set, says why the descriptor leak check cannot run.
var fdCheckOff string

// openFDs lists this process's descriptors, where /proc can tell.
func openFDs() ([]string, bool) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, false
	}
	fds := make([]string, 0, len(ents))
	for _, e := range ents {
		// The descriptor ReadDir used is listed but already closed.
		if _, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			fds = append(fds, e.Name())
		}
	}
	return fds, true
}

func describeFDs(fds []string) []string {
	out := make([]string, 0, len(fds))
	for _, fd := range fds {
		target, _ := os.Readlink("/proc/self/fd/" + fd)
		out = append(out, fd+" -> "+target)
	}
	return out
}
