package sysfs

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

// Read limits. Pseudo-files report sizes that mean nothing (0 or 4096), so nothing is
// sized from a stat: every read is bounded by one of these and a file that is longer
// is an error, not silently truncated.
const (
	// attrLimit bounds a sysfs attribute: a show() routine fills at most one page
	// (fs/sysfs/file.c sysfs_kf_seq_show, PAGE_SIZE).
	attrLimit = 4096
	// aerLimit bounds an aer_dev_* attribute: a line per error type, about 30.
	aerLimit = 4096
	// configLimit is the size of PCI Express configuration space
	// (include/uapi/linux/pci_regs.h PCI_CFG_SPACE_EXP_SIZE).
	configLimit = 4096
	// procLimit bounds a whole /proc or /boot file (a /proc/cpuinfo of a few hundred
	// CPUs is well below it).
	procLimit = 4 << 20
)

// maxLinkHops bounds how many symbolic links one path resolution in a snapshot
// follows before failing, as the kernel's MAXSYMLINKS (40, include/linux/namei.h)
// does. It is os.Root's limit rather than the kernel's, so that a snapshot and the
// same tree on disk resolve exactly alike.
const maxLinkHops = 8

var (
	// ErrNoSysfs is returned (wrapped) by PCIRecords when the root has no readable
	// /sys/bus/pci/devices: there is nothing to evaluate.
	ErrNoSysfs = errors.New("sysfs: no PCI functions to read")

	errEscapes   = errors.New("symbolic link leads outside the root")
	errLoop      = errors.New("too many levels of symbolic links")
	errNotDir    = errors.New("not a directory")
	errIsDir     = errors.New("is a directory")
	errNotFile   = errors.New("not a regular file: a device node, FIFO or socket is never opened")
	errNotLink   = errors.New("not a symbolic link")
	errTooLarge  = errors.New("file larger than the read limit")
	errEmptyName = errors.New("empty file name")
)

// FS is a root that stands for "/": it reads /sys, /proc, /dev and /boot beneath it.
// Create one with [NewFS], [OpenSnapshot] or [ReadSnapshot]; the zero FS is not usable.
// An FS may be used from several goroutines at once.
type FS struct {
	t tree
	// live is set when the root's sys is a mounted sysfs: config space is then read
	// register by register (pcie.ReadConfig), and a copy of it in one read.
	live bool
	// budget bounds the read; see Budget.
	budget Budget
}

// WithBudget returns fsys reading within the limits of b instead of [DefaultBudget].
// For a snapshot, the limits on the archive itself are those it was loaded with
// ([ReadSnapshotBudget]).
func (fsys FS) WithBudget(b Budget) FS {
	fsys.budget = b
	return fsys
}

// NewFS returns an FS rooted at the directory root, which stands for "/". Reads are
// confined to root with [os.Root]: no path or link leads outside it. Call Close when
// done with it.
func NewFS(root string) (FS, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return FS{}, fmt.Errorf("sysfs: root: %w", err)
	}
	if !fi.IsDir() {
		return FS{}, fmt.Errorf("sysfs: root %q is not a directory", root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return FS{}, fmt.Errorf("sysfs: root: %w", err)
	}
	return FS{t: dirTree{r: r}, live: isSysfs(filepath.Join(root, "sys")), budget: DefaultBudget}, nil
}

// Close releases the directory an FS made by [NewFS] holds open. It does nothing for a
// snapshot. Calling it more than once is harmless.
func (fsys FS) Close() error {
	if fsys.t == nil {
		return nil
	}
	return fsys.t.close()
}

// tree is what an FS reads: a directory on disk (dirTree) or a snapshot loaded into
// memory (memTree). Names are slash-separated, clean and relative to the tree's root,
// "." being the root itself. Symbolic links met inside a name are followed only while
// they stay inside the tree; one that leads out is an error.
type tree interface {
	// readFile reads the file name into buf and returns the number of bytes read.
	// It stops when buf is full, at end of file, and, unless toEOF is set, after the
	// first read that returns less than asked: a sysfs attribute is served whole by
	// one read (fs/kernfs/file.c). The final link, if any, is followed.
	readFile(name string, buf []byte, toEOF bool) (int, error)
	// readAll reads the file name to its end, or to limit+1 bytes when it is longer;
	// the buffer grows with what is read, so a large limit costs nothing up front.
	readAll(name string, limit int) ([]byte, error)
	// names lists the directory name, sorted, without looking at the entries.
	names(name string) ([]string, error)
	// readDir lists the directory name with the type of each entry, sorted by
	// name, without following the entries themselves. It may stat every entry.
	readDir(name string) ([]dirEntry, error)
	// lstat describes name without following a final link.
	lstat(name string) (fileInfo, error)
	// readLink returns the target of the link name as stored, errNotLink when name
	// is not a link.
	readLink(name string) (string, error)
	// openReaderAt opens the file name for reads at offsets, for files whose
	// every byte costs (PCI config space), and returns its size. The caller closes it.
	openReaderAt(name string) (readerAtCloser, int64, error)
	// sub returns the tree rooted at directory name; links inside it are confined
	// to it. The caller closes it.
	sub(name string) (tree, error)
	close() error
}

// readerAtCloser is an open file read at offsets.
type readerAtCloser interface {
	io.ReaderAt
	io.Closer
}

// dirEntry is one entry of a directory listing.
type dirEntry struct {
	name string
	typ  fs.FileMode // type bits only: 0 for a regular file, fs.ModeDir, fs.ModeSymlink, ...
}

// fileInfo is what lstat reports.
type fileInfo struct {
	mode         fs.FileMode // type and permission bits
	major, minor uint32      // device number of a device node
	hasDev       bool        // major and minor are known
}

// pathErr wraps err, naming the root-relative path as an absolute one
// ("/sys/bus/pci/devices"), and drops any path the tree already put in it.
func pathErr(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &fs.PathError{Op: "sysfs: " + op, Path: "/" + name, Err: err}
}

// join joins root-relative name elements.
func join(elem ...string) string { return path.Join(elem...) }

// linkTarget returns the root-relative name the symbolic link name points to, resolved
// lexically against the link's directory, as the kernel resolves sysfs's relative links.
// A target that is absolute or climbs above the root is an error and is not followed.
func (fsys FS) linkTarget(name string) (string, error) {
	target, err := fsys.t.readLink(name)
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	return resolveLexical(name, target)
}

// resolveLexical resolves the target of the link at name against the link's
// directory.
func resolveLexical(name, target string) (string, error) {
	if target == "" {
		return "", pathErr("readlink", name, errEmptyName)
	}
	if path.IsAbs(target) {
		return "", pathErr("readlink", name, fmt.Errorf("%w: %q", errEscapes, target))
	}
	r := path.Join(path.Dir(name), target)
	if r == ".." || strings.HasPrefix(r, "../") {
		return "", pathErr("readlink", name, fmt.Errorf("%w: %q", errEscapes, target))
	}
	return r, nil
}

// readFile reads the whole file name, at most limit bytes; a longer file is an error.
func (fsys FS) readFile(name string, limit int) ([]byte, error) {
	b, err := fsys.t.readAll(name, limit)
	if err != nil {
		return nil, pathErr("read", name, err)
	}
	if len(b) > limit {
		return nil, pathErr("read", name, fmt.Errorf("%w (%d bytes)", errTooLarge, limit))
	}
	return b, nil
}

// readBounded reads name from t into buf, which is one byte longer than the largest
// acceptable file. Errors name prefix/name.
func readBounded(t tree, name, prefix string, buf []byte, toEOF bool) ([]byte, error) {
	n, err := t.readFile(name, buf, toEOF)
	return bounded(buf, n, err, name, prefix)
}

// bounded completes readBounded from what readFile returned.
func bounded(buf []byte, n int, err error, name, prefix string) ([]byte, error) {
	if err == nil && n == len(buf) {
		err = fmt.Errorf("%w (%d bytes)", errTooLarge, len(buf)-1)
	}
	if err != nil {
		full := name
		if prefix != "" {
			full = prefix + "/" + name
		}
		return nil, pathErr("read", full, err)
	}
	return buf[:n], nil
}

// optional turns a missing file into ok == false and no error.
func optional(err error) (ok bool, _ error) {
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}
