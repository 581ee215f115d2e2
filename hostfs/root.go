package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxFileSize bounds a whole /proc or /boot file, or a snapshot member (a
// /proc/cpuinfo of a few hundred CPUs is well below it). Pseudo-files report sizes that
// mean nothing (0 or 4096), so nothing is sized from a stat: every read is bounded and
// a file that is longer is an error, not silently truncated.
const MaxFileSize = 4 << 20

// maxLinkHops bounds how many symbolic links one path resolution in a snapshot
// follows before failing, as the kernel's MAXSYMLINKS (40, include/linux/namei.h)
// does. It is os.Root's limit rather than the kernel's, so that a snapshot and the
// same tree on disk resolve exactly alike.
const maxLinkHops = 8

var (
	// ErrNotLink is returned by ReadLink for a name that is not a symbolic link.
	ErrNotLink = errors.New("not a symbolic link")
	// ErrTooLarge is wrapped by a read of a file longer than its limit.
	ErrTooLarge = errors.New("file larger than the read limit")

	// ErrNotFile is wrapped by an open of anything but a regular file or a
	// directory: a device node, FIFO or socket is never opened.
	ErrNotFile = errors.New("not a regular file: a device node, FIFO or socket is never opened")

	errEscapes   = errors.New("symbolic link leads outside the root")
	errLoop      = errors.New("too many levels of symbolic links")
	errNotDir    = errors.New("not a directory")
	errIsDir     = errors.New("is a directory")
	errEmptyName = errors.New("empty file name")
)

// Root stands for "/": packages sysfs and procfs read /sys, /proc, /dev and /boot
// beneath it. Create one with [Open] or, for a snapshot held in memory, with a
// [MemBuilder]; the zero Root is not usable. A Root may be used from several
// goroutines at once.
//
// Names are slash-separated, clean and relative to the root ("sys/bus/pci/devices"),
// "." being the root itself. Symbolic links met inside a name are followed only while
// they stay inside the root; one that leads out is an error.
type Root struct {
	t tree
	// live is set when the root's sys is a mounted sysfs.
	live bool
	// budget bounds the read; see Budget.
	budget Budget
	// meter counts the bytes read, with those of every root and named file of the
	// same run; see Meter.
	meter *Meter
}

// Open returns a Root at the directory dir, which stands for "/". Reads are confined
// to dir with [os.Root]: no path or link leads outside it. Call Close when done with
// it.
func Open(dir string) (Root, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return Root{}, fmt.Errorf("hostfs: root: %w", err)
	}
	if !fi.IsDir() {
		return Root{}, fmt.Errorf("hostfs: root %q is not a directory", dir)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return Root{}, fmt.Errorf("hostfs: root: %w", err)
	}
	return Root{
		t:      dirTree{r: r},
		live:   isSysfs(filepath.Join(dir, "sys")),
		budget: DefaultBudget,
		meter:  NewMeter(DefaultBudget.RunBytes),
	}, nil
}

// Close releases the directory a Root made by [Open] holds open. It does nothing for
// one held in memory. Calling it more than once is harmless.
func (r Root) Close() error {
	if r.t == nil {
		return nil
	}
	return r.t.close()
}

// WithBudget returns r reading within the limits of b instead of [DefaultBudget].
// For a snapshot, the limits on the archive itself are those it was loaded with.
func (r Root) WithBudget(b Budget) Root {
	r.budget = b
	return r
}

// Budget returns the limits r reads within.
func (r Root) Budget() Budget { return r.budget }

// Live reports whether the root's sys is a mounted sysfs, where every PCI
// config-space register read is a configuration cycle, rather than a copy of one on
// an ordinary file system or in memory.
func (r Root) Live() bool { return r.live }

// Read reads the file name into buf and returns the number of bytes read. It stops
// when buf is full, at end of file, and, unless toEOF is set, after the first read
// that returns less than asked: a sysfs attribute is served whole by one read
// (fs/kernfs/file.c). The final link, if any, is followed. Anything but a regular
// file is refused before it is opened.
func (r Root) Read(name string, buf []byte, toEOF bool) (int, error) {
	n, _, err := r.read(name, buf, toEOF, false)
	return n, err
}

// ReadListed is [Root.Read] of a name that a listing of this directory
// ([Root.ReadDir]) has just given as a regular file, and also returns the file's
// permission bits, taken from the open file: a capture that keeps them costs no
// stat of its own. The listing stands for the look Read takes before it opens a
// file: the open file is still looked at (fstat) before anything is read, so a
// device node or FIFO put in its place since the listing is refused unread.
func (r Root) ReadListed(name string, buf []byte, toEOF bool) (int, fs.FileMode, error) {
	return r.read(name, buf, toEOF, true)
}

func (r Root) read(name string, buf []byte, toEOF, listed bool) (int, fs.FileMode, error) {
	n, mode, err := r.t.readFile(name, buf, toEOF, listed)
	if cerr := r.meter.charge(n); cerr != nil {
		return 0, 0, cerr
	}
	return n, mode, err
}

// ReadFile reads the whole file name, at most limit bytes; a longer file is an error
// wrapping [ErrTooLarge]. Errors are [*fs.PathError] naming the absolute path.
func (r Root) ReadFile(name string, limit int) ([]byte, error) {
	b, err := r.t.readAll(name, limit)
	if err == nil {
		err = r.meter.charge(len(b))
	}
	if err != nil {
		return nil, PathError("read", name, err)
	}
	if len(b) > limit {
		return nil, PathError("read", name, fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit))
	}
	return b, nil
}

// ReadBounded reads name into buf, which is one byte longer than the largest
// acceptable file, with [Root.Read]. Errors are [*fs.PathError] naming prefix/name.
func (r Root) ReadBounded(name, prefix string, buf []byte, toEOF bool) ([]byte, error) {
	n, err := r.Read(name, buf, toEOF)
	return Bounded(buf, n, err, name, prefix)
}

// Bounded completes a [Root.Read] of name into buf, which is one byte longer than the
// largest acceptable file: a full buf is an error wrapping [ErrTooLarge]. Errors are
// [*fs.PathError] naming prefix/name.
func Bounded(buf []byte, n int, err error, name, prefix string) ([]byte, error) {
	if err == nil && n == len(buf) {
		err = fmt.Errorf("%w (%d bytes)", ErrTooLarge, len(buf)-1)
	}
	if err != nil {
		full := name
		if prefix != "" {
			full = prefix + "/" + name
		}
		return nil, PathError("read", full, err)
	}
	return buf[:n], nil
}

// Names lists the directory name, sorted, without looking at the entries.
func (r Root) Names(name string) ([]string, error) { return r.t.names(name) }

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string
	Type fs.FileMode // type bits only: 0 for a regular file, fs.ModeDir, fs.ModeSymlink, ...
}

// ReadDir lists the directory name with the type of each entry, sorted by name,
// without following the entries themselves.
func (r Root) ReadDir(name string) ([]DirEntry, error) { return r.t.readDir(name) }

// FileInfo is what Lstat reports.
type FileInfo struct {
	Mode         fs.FileMode // type and permission bits
	Major, Minor uint32      // device number of a device node
	HasDev       bool        // Major and Minor are known
}

// Lstat describes name without following a final link.
func (r Root) Lstat(name string) (FileInfo, error) { return r.t.lstat(name) }

// ReadLink returns the target of the link name as stored, an error wrapping
// [ErrNotLink] when name is not a link.
func (r Root) ReadLink(name string) (string, error) { return r.t.readLink(name) }

// LinkTarget returns the root-relative name the symbolic link name points to,
// resolved with [ResolveLink]. Errors are [*fs.PathError].
func (r Root) LinkTarget(name string) (string, error) {
	target, err := r.t.readLink(name)
	if err != nil {
		return "", PathError("readlink", name, err)
	}
	return ResolveLink(name, target)
}

// ResolveLink resolves the target of the link at name lexically against the link's
// directory, as the kernel resolves sysfs's relative links. A target that is absolute
// or climbs above the root is an error and is not followed.
func ResolveLink(name, target string) (string, error) {
	if target == "" {
		return "", PathError("readlink", name, errEmptyName)
	}
	if path.IsAbs(target) {
		return "", PathError("readlink", name, fmt.Errorf("%w: %q", errEscapes, target))
	}
	res := path.Join(path.Dir(name), target)
	if res == ".." || strings.HasPrefix(res, "../") {
		return "", PathError("readlink", name, fmt.Errorf("%w: %q", errEscapes, target))
	}
	return res, nil
}

// ReaderAtCloser is an open file read at offsets.
type ReaderAtCloser interface {
	io.ReaderAt
	io.Closer
}

// OpenReaderAt opens the file name for reads at offsets, for files whose every byte
// costs (PCI config space), and returns its size. The caller closes it.
func (r Root) OpenReaderAt(name string) (ReaderAtCloser, int64, error) {
	return r.t.openReaderAt(name)
}

// Sub returns the Root at the directory name below r; links inside it are confined
// to it. The caller closes it.
func (r Root) Sub(name string) (Root, error) {
	t, err := r.t.sub(name)
	if err != nil {
		return Root{}, err
	}
	r.t = t
	return r, nil
}

// tree is what a Root reads: a directory on disk (dirTree, fdTree) or a snapshot
// loaded into memory (memTree). See Root's methods of the same names.
type tree interface {
	// readFile also returns the file's permission bits, from the open file, when
	// listed (Root.ReadListed) asks for them; otherwise it may return 0 for them.
	readFile(name string, buf []byte, toEOF, listed bool) (int, fs.FileMode, error)
	// readAll reads the file name to its end, or to limit+1 bytes when it is longer;
	// the buffer grows with what is read, so a large limit costs nothing up front.
	readAll(name string, limit int) ([]byte, error)
	names(name string) ([]string, error)
	readDir(name string) ([]DirEntry, error)
	lstat(name string) (FileInfo, error)
	readLink(name string) (string, error)
	openReaderAt(name string) (ReaderAtCloser, int64, error)
	fileID(name string) (FileID, error)
	sub(name string) (tree, error)
	close() error
}

// PathError wraps err, naming the root-relative name as an absolute path
// ("/sys/bus/pci/devices"), and drops any path the tree already put in it. The
// operation is prefixed with the package that reads the top-level directory: "sysfs"
// for /sys, "procfs" for /proc, /dev and /boot, "hostfs" for the rest.
func PathError(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &fs.PathError{Op: reader(name) + ": " + op, Path: "/" + name, Err: err}
}

func reader(name string) string {
	top, _, _ := strings.Cut(name, "/")
	switch top {
	case "sys":
		return "sysfs"
	case "proc", "dev", "boot":
		return "procfs"
	}
	return "hostfs"
}

// Optional turns an error wrapping [fs.ErrNotExist] into ok == false and no error.
func Optional(err error) (ok bool, _ error) {
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}
