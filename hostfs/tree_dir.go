package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
)

// dirTree is a directory on disk, confined with [os.Root]: the standard library refuses
// any name or link that would lead outside it.
type dirTree struct {
	r *os.Root
}

func (t dirTree) readFile(name string, buf []byte, toEOF, _ bool) (int, fs.FileMode, error) {
	f, fi, err := t.openRegular(name)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if errors.Is(err, io.EOF) || m == 0 && err == nil {
			break
		}
		if err != nil {
			return n, 0, err
		}
		if !toEOF && n < len(buf) {
			break
		}
	}
	return n, fi.Mode().Perm(), nil
}

func (t dirTree) openReaderAt(name string) (ReaderAtCloser, int64, error) {
	f, fi, err := t.openRegular(name)
	if err != nil {
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// openRegular opens the regular file name for reading. Anything else is refused
// before it is opened: opening a device node can have effects (a watchdog, a tape
// rewinding) and a FIFO can block, and a hostile --root tree may hold either where
// an attribute is expected. The type is checked again on the open file, in case
// the name was replaced in between. openFlags keeps a FIFO or a terminal that got
// through from blocking or becoming the controlling terminal.
//
// It returns the open file's FileInfo too.
func (t dirTree) openRegular(name string) (*os.File, fs.FileInfo, error) {
	fi, err := t.r.Stat(name)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, notRegular(fi.Mode())
	}
	f, err := t.r.OpenFile(name, openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = notRegular(fi.Mode())
		}
		return nil, nil, err
	}
	return f, fi, nil
}

// notRegular is ErrNotFile for a file of mode m.
func notRegular(m fs.FileMode) error {
	if m.IsDir() {
		return errIsDir
	}
	return fmt.Errorf("%w (%s)", ErrNotFile, FileKind(m))
}

// FileKind names the type of a file of mode m for a message: "a regular file",
// "a directory", "a symbolic link", "a character device", "a block device", "a
// named pipe", "a socket", or its mode string for anything else.
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}

func (t dirTree) readAll(name string, limit int) ([]byte, error) {
	f, _, err := t.openRegular(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 0, min(limit+1, 4096))
	for len(buf) <= limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), limit+1-len(buf)))
		}
		n, err := f.Read(buf[len(buf):min(cap(buf), limit+1)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) || n == 0 && err == nil {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

func (t dirTree) names(name string) ([]string, error) {
	f, err := t.r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Readdirnames, unlike ReadDir on a file opened in a Root, stats nothing.
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func (t dirTree) readDir(name string) ([]DirEntry, error) {
	f, err := t.r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, len(des))
	for i, d := range des {
		out[i] = DirEntry{Name: d.Name(), Type: d.Type()}
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (t dirTree) lstat(name string) (FileInfo, error) {
	fi, err := t.r.Lstat(name)
	if err != nil {
		return FileInfo{}, err
	}
	info := FileInfo{Mode: fi.Mode()}
	if fi.Mode()&fs.ModeDevice != 0 {
		info.Major, info.Minor, info.HasDev = deviceNumber(fi)
	}
	return info, nil
}

func (t dirTree) readLink(name string) (string, error) {
	target, err := t.r.Readlink(name)
	if errors.Is(err, syscall.EINVAL) {
		return "", ErrNotLink
	}
	return target, err
}

func (t dirTree) fileID(name string) (FileID, error) {
	fi, err := t.r.Stat(name)
	if err != nil {
		return FileID{}, err
	}
	return fileIDOf(fi), nil
}

func (t dirTree) close() error { return t.r.Close() }
