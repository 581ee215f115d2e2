package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// This file reads files named by a user (--config, --pci-ids, --nccl-lib, the
// previous --prometheus file) or by a job's environment (NCCL_CONF_FILE under
// --pid). Such a file's root is the host's "/": the path is the user's, so its
// links are followed as the kernel follows them. Everything else is as below a
// Root: only a regular file is read, anything else is refused without blocking
// (the type is looked at before the open, the open cannot wait for a FIFO's
// writer, and the type is looked at again on the open file), and every read is
// bounded by its Kind and the run's Meter.

// ErrReplaced is wrapped by the error for a named file that was replaced by
// another between the look at its type and its open.
var ErrReplaced = errors.New("replaced while it was opened")

// ReadNamed reads the whole regular file at path, a file of kind k that a user
// named, at most k.Limit bytes, counting them on m (nil: on nothing but the
// limit). Errors are [*fs.PathError] naming path.
func ReadNamed(m *Meter, path string, k Kind) ([]byte, error) {
	f, err := OpenNamed(m, path, k)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllFile(f)
}

// OpenNamed opens the regular file at path, a file of kind k that a user named,
// for reading in pieces, with the rules of [ReadNamed].
func OpenNamed(m *Meter, path string, k Kind) (*File, error) {
	f, size, err := openNamed(path)
	if err != nil {
		return nil, &fs.PathError{Op: "hostfs: open", Path: path, Err: err}
	}
	return &File{ra: f, c: f, size: size, kind: k, m: m, path: path, op: "hostfs: read"}, nil
}

// openNamed opens the regular file at path for reading, following its links:
// anything but a regular file is refused before it is opened, and the open file
// must be the file looked at.
func openNamed(path string) (*os.File, int64, error) {
	before, err := os.Stat(path)
	if err != nil {
		return nil, 0, unwrapPath(err)
	}
	if !before.Mode().IsRegular() {
		return nil, 0, notRegular(before.Mode())
	}
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, 0, unwrapPath(err)
	}
	after, err := f.Stat()
	switch {
	case err != nil:
	case !after.Mode().IsRegular():
		err = notRegular(after.Mode())
	case !os.SameFile(before, after):
		err = ErrReplaced
	}
	if err != nil {
		f.Close()
		return nil, 0, unwrapPath(err)
	}
	return f, after.Size(), nil
}

// unwrapPath drops the path an os error names: the caller's error names it.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readAllFile reads f to its end, growing the buffer with what is read, so a
// large limit costs nothing up front.
func readAllFile(f *File) ([]byte, error) {
	size := f.Size()
	if size < 0 || size > f.kind.Limit {
		size = 0
	}
	buf := make([]byte, 0, size+512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Cred is whom a file is read for: a process's file-system user and group ids,
// its supplementary groups, and whether its effective capabilities bypass
// permission checks (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), the inputs of the
// kernel's generic_permission (fs/namei.c) for reading a file and searching
// directories. Read them from /proc/PID/status (package procfs).
type Cred struct {
	UID    uint32
	GID    uint32
	Groups []uint32
	// Bypass is set when CapEff holds CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH,
	// either of which lets the process read any file and search any directory.
	Bypass bool
}

// ErrNotPermitted is wrapped, with [fs.ErrPermission], by ReadAs's error for a file
// the process it reads for could not read itself.
var ErrNotPermitted = errors.New("the process it is read for may not read it")

// ReadAs reads the regular file at path, a file of kind k, as [ReadNamed] does, but
// only if the process c describes could read it itself: read permission on the
// file and search permission on every directory above it, on the path as given
// and on the path its links lead to. A job's environment (NCCL_CONF_FILE) names
// such files, and p2pcheck, run as root, must not show a job's user a file that
// only root could read. Permissions are judged by the mode bits, as
// generic_permission (fs/namei.c) does without POSIX ACLs; a file an ACL alone
// opens to the process is refused. path must be absolute.
func ReadAs(m *Meter, path string, k Kind, c Cred) ([]byte, error) {
	pathErr := func(err error) error { return &fs.PathError{Op: "hostfs: read", Path: path, Err: err} }
	if !filepath.IsAbs(path) {
		return nil, pathErr(errors.New("not an absolute path"))
	}
	// The directories first, from the top: what lies below one the process may not
	// search is not looked at, so not even its existence is told.
	if err := c.maySearch(filepath.Clean(path)); err != nil {
		return nil, pathErr(err)
	}
	f, size, err := openNamed(path)
	if err != nil {
		return nil, pathErr(err)
	}
	file := &File{ra: f, c: f, size: size, kind: k, m: m, path: path, op: "hostfs: read"}
	defer file.Close()
	if err := c.mayRead(path, f); err != nil {
		return nil, pathErr(err)
	}
	return readAllFile(file)
}

// maySearch checks that c may search every directory above path, from "/" down,
// and stops at the first it may not.
func (c Cred) maySearch(path string) error {
	var dirs []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == "/" {
			break
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		di, err := os.Stat(dirs[i])
		if err != nil {
			return unwrapPath(err)
		}
		if !c.may(di, 1) {
			return c.denied("directory " + dirs[i])
		}
	}
	return nil
}

// mayRead checks that c may read the open file f found at path: the file itself,
// and the directories above the path its links resolve to, which must still lead
// to f.
func (c Cred) mayRead(path string, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !c.may(fi, 4) {
		return c.denied("the file")
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return unwrapPath(err)
	}
	if rfi, err := os.Stat(real); err != nil || !os.SameFile(fi, rfi) {
		return ErrReplaced
	}
	return c.maySearch(real)
}

func (c Cred) denied(what string) error {
	return fmt.Errorf("%w: %w (uid %d, gid %d: no permission on %s)", fs.ErrPermission, ErrNotPermitted, c.UID, c.GID, what)
}

// may reports whether c may access fi for want, a mask of the mode's rwx bits
// (4 read, 1 execute or search): the owner's bits for the owner, the group's for a
// member of its group, the others' otherwise (generic_permission, acl_permission_check
// in fs/namei.c).
func (c Cred) may(fi fs.FileInfo, want fs.FileMode) bool {
	if c.Bypass {
		return true
	}
	uid, gid, ok := owner(fi)
	if !ok {
		return false
	}
	perm := fi.Mode().Perm()
	switch {
	case uid == c.UID:
		perm >>= 6
	case c.inGroup(gid):
		perm >>= 3
	}
	return perm&want == want
}

func (c Cred) inGroup(gid uint32) bool {
	if gid == c.GID {
		return true
	}
	for _, g := range c.Groups {
		if g == gid {
			return true
		}
	}
	return false
}
