package hostfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// On Linux, the directories PCIRecords walks are opened as bare descriptors: reading an
// attribute is then openat, read and close, where an [os.Root] adds a poller
// registration and per-call bookkeeping. Only single path elements are opened this
// way, with O_NOFOLLOW, so nothing can lead outside; whenever a link is met the
// operation is handed to an os.Root confined to the directory, which gives exactly the
// semantics of dirTree.

// sub opens the directory name below t as an fdTree.
func (t dirTree) sub(name string) (tree, error) {
	f, err := t.r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var openErr error
	if err := rc.Control(func(dirfd uintptr) {
		fd, openErr = openat(int(dirfd), ".", unix.O_RDONLY|unix.O_DIRECTORY)
	}); err != nil {
		return nil, err
	}
	if openErr != nil {
		return nil, openErr
	}
	return &fdTree{top: t.r, name: name, fd: fd}, nil
}

// fdTree is a directory of a dirTree held as a descriptor.
type fdTree struct {
	top  *os.Root // the dirTree's root
	name string   // this directory, relative to top
	fd   int
}

// simple reports whether name is one path element, which openat can take with
// O_NOFOLLOW and stay inside the directory.
func simple(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.Contains(name, "/")
}

// openat opens name relative to dirfd, never following a final link and retrying on
// EINTR.
func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// isLink reports the errors openat with O_NOFOLLOW gives for a link: ELOOP, or ENOTDIR
// when O_DIRECTORY was asked for.
func isLink(err error) bool {
	return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)
}

// fallback runs f on this directory opened as an os.Root, for what the descriptor
// path does not handle: names of several elements and links.
func (t *fdTree) fallback(f func(dirTree) error) error {
	r, err := t.top.OpenRoot(t.name)
	if err != nil {
		return err
	}
	defer r.Close()
	return f(dirTree{r: r})
}

func (t *fdTree) readFile(name string, buf []byte, toEOF bool) (int, error) {
	if !simple(name) {
		return t.readFileRoot(name, buf, toEOF)
	}
	fd, err := t.openRegular(name)
	if errors.Is(err, unix.ELOOP) {
		return t.readFileRoot(name, buf, toEOF)
	}
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += m
		if m == 0 || !toEOF && n < len(buf) {
			break
		}
	}
	return n, nil
}

func (t *fdTree) openReaderAt(name string) (ReaderAtCloser, int64, error) {
	if !simple(name) {
		return t.openReaderAtRoot(name)
	}
	fd, err := t.openRegular(name)
	if errors.Is(err, unix.ELOOP) {
		return t.openReaderAtRoot(name)
	}
	if err != nil {
		return nil, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	return preadFile(fd), st.Size, nil
}

// openRegular opens the single element name for reading if it is a regular file, as
// dirTree.openRegular does: the type is looked at without opening (a device node
// is never opened, a FIFO never waited on) and again on the open descriptor. A link
// gives ELOOP, for the caller to hand to the os.Root fallback.
func (t *fdTree) openRegular(name string) (int, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(t.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, err
		}
		break
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return -1, unix.ELOOP
	}
	if err := regularMode(st.Mode); err != nil {
		return -1, err
	}
	fd, err := openat(t.fd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return -1, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := regularMode(st.Mode); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// regularMode is nil for the st_mode of a regular file and the error for anything
// else.
func regularMode(mode uint32) error {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return errIsDir
	case unix.S_IFCHR:
		return notRegular(fs.ModeDevice | fs.ModeCharDevice)
	case unix.S_IFBLK:
		return notRegular(fs.ModeDevice)
	case unix.S_IFIFO:
		return notRegular(fs.ModeNamedPipe)
	case unix.S_IFSOCK:
		return notRegular(fs.ModeSocket)
	}
	return notRegular(fs.ModeIrregular)
}

func (t *fdTree) openReaderAtRoot(name string) (r ReaderAtCloser, size int64, err error) {
	err = t.fallback(func(d dirTree) error {
		r, size, err = d.openReaderAt(name)
		return err
	})
	return r, size, err
}

// preadFile reads a bare descriptor at offsets with pread(2).
type preadFile int

func (f preadFile) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Pread(int(f), p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

func (f preadFile) Close() error { return unix.Close(int(f)) }

func (t *fdTree) readFileRoot(name string, buf []byte, toEOF bool) (n int, err error) {
	err = t.fallback(func(d dirTree) error {
		n, err = d.readFile(name, buf, toEOF)
		return err
	})
	return n, err
}

func (t *fdTree) readAll(name string, limit int) (b []byte, err error) {
	err = t.fallback(func(d dirTree) error {
		b, err = d.readAll(name, limit)
		return err
	})
	return b, err
}

func (t *fdTree) names(name string) ([]string, error) {
	if name != "." && !simple(name) {
		return t.namesRoot(name)
	}
	fd, err := openat(t.fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if name != "." && isLink(err) {
		return t.namesRoot(name)
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	slices.Sort(names)
	return names, nil
}

func (t *fdTree) namesRoot(name string) (names []string, err error) {
	err = t.fallback(func(d dirTree) error {
		names, err = d.names(name)
		return err
	})
	return names, err
}

func (t *fdTree) readDir(name string) (ents []DirEntry, err error) {
	err = t.fallback(func(d dirTree) error {
		ents, err = d.readDir(name)
		return err
	})
	return ents, err
}

func (t *fdTree) lstat(name string) (fi FileInfo, err error) {
	err = t.fallback(func(d dirTree) error {
		fi, err = d.lstat(name)
		return err
	})
	return fi, err
}

func (t *fdTree) readLink(name string) (string, error) {
	if !simple(name) {
		var target string
		err := t.fallback(func(d dirTree) (err error) {
			target, err = d.readLink(name)
			return err
		})
		return target, err
	}
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(t.fd, name, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EINVAL:
			return "", ErrNotLink
		case err != nil:
			return "", err
		case n < len(buf):
			return string(buf[:n]), nil
		case len(buf) >= 1<<16:
			return "", syscall.ENAMETOOLONG
		}
		buf = make([]byte, 2*len(buf))
	}
}

func (t *fdTree) sub(name string) (tree, error) {
	if simple(name) {
		fd, err := openat(t.fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err == nil {
			return &fdTree{top: t.top, name: t.name + "/" + name, fd: fd}, nil
		}
		if !isLink(err) {
			return nil, err
		}
	}
	// A link, or a longer name: resolve it inside this directory, as os.Root would,
	// and hand back the os.Root itself; closing the tree closes it.
	var sub tree
	err := t.fallback(func(d dirTree) error {
		r, err := d.r.OpenRoot(name)
		if err == nil {
			sub = dirTree{r: r}
		}
		return err
	})
	return sub, err
}

func (t *fdTree) fileID(name string) (id FileID, err error) {
	err = t.fallback(func(d dirTree) error {
		id, err = d.fileID(name)
		return err
	})
	return id, err
}

func (t *fdTree) close() error {
	if t.fd < 0 {
		return nil
	}
	err := unix.Close(t.fd)
	t.fd = -1
	return err
}
