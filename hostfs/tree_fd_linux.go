package hostfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// On Linux, the directories PCIRecords walks are opened as bare descriptors: reading an
// attribute is then openat, read and close, where an [os.Root] adds a poller
// registration and per-call bookkeeping. Only single path elements are opened this
// way, with O_NOFOLLOW, so nothing can lead outside; whenever a link is met the
// operation is handed to an os.Root confined to the directory, which gives exactly the
// semantics of dirTree.
//
// A directory on a mounted sysfs (kernfs) holds only directories, regular files and
// links (fs/kernfs/inode.c kernfs_init_inode), so a file of it cannot be a device
// node or a FIFO: it is opened without looking at it first, with openat2(2)'s
// RESOLVE_NO_XDEV so that the open never crosses into a file system mounted over
// the name. An attribute costs openat2, read and close there, against lstat, open,
// fstat, read and close elsewhere.

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
		fd, openErr = sysCalls{}.openat(int(dirfd), ".", unix.O_RDONLY|unix.O_DIRECTORY)
	}); err != nil {
		return nil, err
	}
	if openErr != nil {
		return nil, openErr
	}
	return newFDTree(t.r, name, fd), nil
}

// newFDTree is the fdTree of the directory fd, name below top, whose file system
// is looked at (fstatfs).
func newFDTree(top *os.Root, name string, fd int) *fdTree {
	magic := fsMagic(fd)
	return &fdTree{top: top, name: name, fd: fd, kernfs: magic == unix.SYSFS_MAGIC, sys: newSysCalls(magic)}
}

// fdTree is a directory of a dirTree held as a descriptor.
type fdTree struct {
	top  *os.Root // the dirTree's root
	name string   // this directory, relative to top
	fd   int
	// kernfs is set when fd is a directory of a mounted sysfs (see above).
	kernfs bool
	sys    sysCalls // the metadata calls of its file system
}

// listings holds the buffers list reads directory listings into.
var listings = sync.Pool{New: func() any { b := make([]byte, 0, 8192); return &b }}

// list reads the whole listing of the open directory fd with getdents(2) into a
// buffer of listings, which the caller gives back.
func list(s sysCalls, fd int) (*[]byte, error) {
	bp := listings.Get().(*[]byte)
	buf := (*bp)[:0]
	for {
		if cap(buf)-len(buf) < 1024 {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := s.getdents(fd, buf[len(buf):cap(buf)])
		if err != nil {
			*bp = buf
			listings.Put(bp)
			return nil, err
		}
		if n <= 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	*bp = buf
	for b := buf; len(b) > 0; {
		_, rest, ok := dirent(b)
		if !ok {
			listings.Put(bp)
			return nil, unix.EIO
		}
		b = rest
	}
	return bp, nil
}

// direntRec is one record of a listing.
type direntRec struct {
	name  []byte
	dtype uint8
}

// dirent decodes the first struct linux_dirent64 (include/linux/dirent.h: d_ino
// u64, d_off s64, d_reclen u16, d_type u8, d_name NUL-terminated) of b. The
// entries "." and ".." come back with an empty name.
func dirent(b []byte) (rec direntRec, rest []byte, ok bool) {
	if len(b) < 19 {
		return direntRec{}, nil, false
	}
	reclen := int(b[16]) | int(b[17])<<8
	if reclen < 19 || reclen > len(b) {
		return direntRec{}, nil, false
	}
	name := b[19:reclen]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	if string(name) == "." || string(name) == ".." {
		name = nil
	}
	return direntRec{name: name, dtype: b[18]}, b[reclen:], true
}

// entries returns the DirEntries of a listing of the directory fd, sorted by name.
func entries(s sysCalls, fd int, listing []byte) ([]DirEntry, error) {
	var ents []DirEntry
	for b := listing; len(b) > 0; {
		rec, rest, _ := dirent(b)
		b = rest
		if len(rec.name) == 0 {
			continue
		}
		name := string(rec.name)
		typ, known := direntType(rec.dtype)
		if !known {
			var st unix.Stat_t
			if err := s.fstatat(fd, name, &st); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // gone since it was listed
				}
				return nil, err
			}
			typ = fileMode(st.Mode) & fs.ModeType
		}
		ents = append(ents, DirEntry{Name: name, Type: typ})
	}
	slices.SortFunc(ents, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return ents, nil
}

// direntType is the fs.FileMode type bits of a d_type; known is false for
// DT_UNKNOWN.
func direntType(t uint8) (typ fs.FileMode, known bool) {
	switch t {
	case unix.DT_REG:
		return 0, true
	case unix.DT_DIR:
		return fs.ModeDir, true
	case unix.DT_LNK:
		return fs.ModeSymlink, true
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice, true
	case unix.DT_BLK:
		return fs.ModeDevice, true
	case unix.DT_FIFO:
		return fs.ModeNamedPipe, true
	case unix.DT_SOCK:
		return fs.ModeSocket, true
	}
	return 0, false
}

// fileMode is the fs.FileMode of an st_mode.
func fileMode(mode uint32) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFREG:
	default:
		m |= fs.ModeIrregular
	}
	if mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// simple reports whether name is one path element, which openat can take with
// O_NOFOLLOW and stay inside the directory.
func simple(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.Contains(name, "/")
}

// noOpenat2 is set once openat2(2) has failed as absent (ENOSYS: Linux before 5.6)
// or forbidden (EPERM: a seccomp filter that predates it); openSameMount is not
// tried again.
var noOpenat2 atomic.Bool

// openSameMount opens the single element name relative to dirfd as openat does, with
// openat2(2) and RESOLVE_NO_XDEV: a name that another file system is mounted over
// gives EXDEV instead of opening it. ok is false, and nothing was opened, when
// openat2 is not available.
func (s sysCalls) openSameMount(dirfd int, name string, flags int) (fd int, ok bool, err error) {
	if noOpenat2.Load() {
		return -1, false, nil
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC), Resolve: unix.RESOLVE_NO_XDEV}
	fd, err = s.openat2(dirfd, name, &how)
	if err == unix.ENOSYS || err == unix.EPERM {
		noOpenat2.Store(true)
		return -1, false, nil
	}
	return fd, true, err
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

func (t *fdTree) readFile(name string, buf []byte, toEOF, listed bool) (int, fs.FileMode, error) {
	if !simple(name) {
		return t.readFileRoot(name, buf, toEOF)
	}
	var st unix.Stat_t
	fd, perm, err := t.openRegular(name, listed, listed, &st)
	if errors.Is(err, unix.ELOOP) {
		return t.readFileRoot(name, buf, toEOF)
	}
	if err != nil {
		return 0, 0, err
	}
	defer t.sys.close(fd)
	n := 0
	for n < len(buf) {
		m, err := t.sys.read(fd, buf[n:])
		switch err {
		case nil:
		case unix.EISDIR: // opened on kernfs without a look (see openRegular)
			return 0, 0, errIsDir
		default:
			return n, 0, err
		}
		n += m
		if m == 0 || !toEOF && n < len(buf) {
			break
		}
	}
	return n, perm, nil
}

func (t *fdTree) openReaderAt(name string) (ReaderAtCloser, int64, error) {
	if !simple(name) {
		return t.openReaderAtRoot(name)
	}
	var st unix.Stat_t
	fd, _, err := t.openRegular(name, true, false, &st)
	if errors.Is(err, unix.ELOOP) {
		return t.openReaderAtRoot(name)
	}
	if err != nil {
		return nil, 0, err
	}
	return preadFile{fd: fd, sys: t.sys}, st.Size, nil
}

// openRegular opens the single element name for reading if it is a regular file, as
// dirTree.openRegular does: the type is looked at without opening (a device node
// is never opened, a FIFO never waited on) and again on the open descriptor. A link
// gives ELOOP, for the caller to hand to the os.Root fallback.
//
// It returns the open file's permission bits too, and leaves in st what fstat gave
// of the open file. On kernfs the file is opened without a look first, and its type
// and permission bits are looked at only when wantPerm asks for them (perm and st
// are zero otherwise): a directory opened so is found by the read (EISDIR).
// Elsewhere, listed says that a listing has just given name as a regular file
// (Root.ReadListed), which stands for the look before the open.
func (t *fdTree) openRegular(name string, wantPerm, listed bool, st *unix.Stat_t) (int, fs.FileMode, error) {
	if t.kernfs {
		fd, ok, err := t.sys.openSameMount(t.fd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
		switch {
		case !ok || errors.Is(err, unix.EXDEV): // the careful way below
		case err != nil:
			return -1, 0, err
		case !wantPerm:
			return fd, 0, nil
		default:
			return t.checkRegular(fd, st)
		}
	}
	if !listed {
		if err := t.sys.fstatat(t.fd, name, st); err != nil {
			return -1, 0, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return -1, 0, unix.ELOOP
		}
		if err := regularMode(st.Mode); err != nil {
			return -1, 0, err
		}
	}
	fd, err := t.sys.openat(t.fd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return -1, 0, err
	}
	return t.checkRegular(fd, st)
}

// checkRegular returns fd and its permission bits if it is a regular file, and
// otherwise closes it and returns the error.
func (t *fdTree) checkRegular(fd int, st *unix.Stat_t) (int, fs.FileMode, error) {
	if err := t.sys.fstat(fd, st); err != nil {
		t.sys.close(fd)
		return -1, 0, err
	}
	if err := regularMode(st.Mode); err != nil {
		t.sys.close(fd)
		return -1, 0, err
	}
	return fd, fileMode(st.Mode).Perm(), nil
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

// preadFile reads a bare descriptor at offsets with pread(2), made as its tree's
// sysCalls make reads.
type preadFile struct {
	fd  int
	sys sysCalls
}

func (f preadFile) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := f.sys.pread(f.fd, p[n:], off+int64(n))
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

func (f preadFile) Close() error { return f.sys.close(f.fd) }

func (t *fdTree) readFileRoot(name string, buf []byte, toEOF bool) (n int, perm fs.FileMode, err error) {
	err = t.fallback(func(d dirTree) error {
		n, perm, err = d.readFile(name, buf, toEOF, true)
		return err
	})
	return n, perm, err
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
	fd, err := t.sys.openat(t.fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if name != "." && isLink(err) {
		return t.namesRoot(name)
	}
	if err != nil {
		return nil, err
	}
	defer t.sys.close(fd)
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := t.sys.getdents(fd, buf)
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
	if name == "." || simple(name) {
		fd, err := t.sys.openat(t.fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if name == "." || !isLink(err) {
			if err != nil {
				return nil, err
			}
			defer t.sys.close(fd)
			l, err := list(t.sys, fd)
			if err != nil {
				return nil, err
			}
			defer listings.Put(l)
			return entries(t.sys, fd, *l)
		}
	}
	err = t.fallback(func(d dirTree) error {
		ents, err = d.readDir(name)
		return err
	})
	return ents, err
}

func (t *fdTree) lstat(name string) (fi FileInfo, err error) {
	if simple(name) {
		var st unix.Stat_t
		if err := t.sys.fstatat(t.fd, name, &st); err != nil {
			return FileInfo{}, err
		}
		fi := FileInfo{Mode: fileMode(st.Mode)}
		if fi.Mode&fs.ModeDevice != 0 {
			fi.Major, fi.Minor = splitDev(st.Rdev)
			fi.HasDev = true
		}
		return fi, nil
	}
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
	var first [256]byte // most targets fit: sysfs links are a few dozen bytes
	buf := first[:]
	for {
		n, err := t.sys.readlinkat(t.fd, name, buf)
		switch {
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
		// Within one mount the child is on the same file system as t; a
		// directory another one is mounted on is looked at (fstatfs). Without
		// openat2 a mount cannot be told apart, so every child is looked at for
		// its calls, and nothing is opened the kernfs way.
		fd, ok, err := t.sys.openSameMount(t.fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		switch {
		case !ok:
			fd, err = t.sys.openat(t.fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
			if err == nil {
				return &fdTree{top: t.top, name: t.name + "/" + name, fd: fd, sys: newSysCalls(fsMagic(fd))}, nil
			}
		case errors.Is(err, unix.EXDEV):
			fd, err = t.sys.openat(t.fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
			if err == nil {
				return newFDTree(t.top, t.name+"/"+name, fd), nil
			}
		case err == nil:
			return &fdTree{top: t.top, name: t.name + "/" + name, fd: fd, kernfs: t.kernfs, sys: t.sys}, nil
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
	err := t.sys.close(t.fd)
	t.fd = -1
	return err
}
