package hostfs

import "strings"

// Walker opens directories of a Root one element at a time, keeping the chain from
// the root to the last one open, so that visiting directories in sorted order opens
// each once, relative to its parent, where opening each by its whole name would walk
// every element again. A Walker is used by one goroutine; Close it when done.
type Walker struct {
	root  Root
	stack []walkedDir // each the parent of the next
}

type walkedDir struct {
	name string // root-relative
	r    Root
}

// NewWalker returns a Walker of the directories below r.
func NewWalker(r Root) *Walker { return &Walker{root: r} }

// Open returns the directory name (clean, root-relative), opened below the deepest
// open ancestor. The Walker owns it: it stays usable until the next Open of a name
// outside it, or Close. Errors are [*fs.PathError] naming the element that failed.
func (w *Walker) Open(name string) (Root, error) {
	for len(w.stack) > 0 {
		top := w.stack[len(w.stack)-1]
		if top.name == name {
			return top.r, nil
		}
		if rest, ok := strings.CutPrefix(name, top.name); ok && strings.HasPrefix(rest, "/") {
			break
		}
		top.r.Close()
		w.stack = w.stack[:len(w.stack)-1]
	}
	parent, done := w.root, 0 // name[:done] is open
	if len(w.stack) > 0 {
		top := w.stack[len(w.stack)-1]
		parent, done = top.r, len(top.name)+1
	}
	for done < len(name) {
		el, _, _ := strings.Cut(name[done:], "/")
		done += len(el)
		prefix := name[:done] // name is clean: so is every prefix of it
		done++
		r, err := parent.Sub(el)
		if err != nil {
			return Root{}, PathError("open", prefix, err)
		}
		w.stack = append(w.stack, walkedDir{name: prefix, r: r})
		parent = r
	}
	return parent, nil
}

// Close closes every directory the Walker holds open.
func (w *Walker) Close() {
	for _, d := range w.stack {
		d.r.Close()
	}
	w.stack = nil
}
