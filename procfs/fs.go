package procfs

import "github.com/p2pkit/p2pkit/hostfs"

// procLimit bounds a whole /proc or /boot file.
const procLimit = hostfs.MaxFileSize

// FS reads /proc, /dev and /boot beneath a [hostfs.Root]. Create one with [NewFS] or
// [New]; the zero FS is not usable. An FS may be used from several goroutines at
// once.
type FS struct {
	r hostfs.Root
}

// New returns an FS reading the /proc, /dev and /boot of root.
func New(root hostfs.Root) FS { return FS{r: root} }

// NewFS returns an FS reading the /proc, /dev and /boot of the directory dir, which
// stands for "/" ([hostfs.Open]). Call Close when done with it.
func NewFS(dir string) (FS, error) {
	r, err := hostfs.Open(dir)
	if err != nil {
		return FS{}, err
	}
	return FS{r: r}, nil
}

// Close releases the root; see [hostfs.Root.Close].
func (fsys FS) Close() error { return fsys.r.Close() }
