// Package atomicfile is the one writer of every file p2pcheck writes (--prometheus,
// --nfd, --topo-xml, snapshot -o, fix --persist): through a temporary file in the
// target's directory, renamed into place, so a reader never sees a partial file
// and a failed run (a full disk, a crash) leaves the old file or the new one,
// never an empty one.
//
// A target that exists and is not a regular file is refused before anything is
// opened: renaming over /dev/null or a symbolic link would replace it, and opening
// a FIFO for writing waits for a reader. A target is never opened at all, so it is
// never truncated and no link is followed to it.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/p2pkit/p2pkit/hostfs"
)

// TempMarker is in the name of every temporary file Write makes:
// ".NAME.p2pcheck-tmp-RANDOM" beside NAME, recognisable as p2pcheck's.
const TempMarker = ".p2pcheck-tmp-"

// StaleAge is how old a temporary file of Write must be before a later write of
// the same target removes it as left over from a killed run. A write takes
// milliseconds; the margin keeps a concurrent writer's file safe.
const StaleAge = 10 * time.Minute

var (
	// ErrNotRegular is wrapped by the error for a target that exists and is not a
	// regular file: a device node, a directory, a symbolic link, a FIFO.
	ErrNotRegular = errors.New("exists and is not a regular file")
	// ErrExists is wrapped by the error for a target that exists when Options.Force
	// is not set.
	ErrExists = errors.New("exists")
)

// Options tune a write.
type Options struct {
	// Force replaces an existing regular file; without it one is an error wrapping
	// ErrExists.
	Force bool
	// Perm is the new file's permission bits; 0 means 0644.
	Perm fs.FileMode
}

// Write writes the file name (a path a user gave, relative to the working
// directory or absolute) with write, atomically: see the package documentation.
// Links in name's directory are the user's and are followed; the target itself is
// never a link. Errors name the target ("atomicfile: writing NAME: ...").
func Write(name string, opt Options, write func(*os.File) error) error {
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return wrap(name, err)
	}
	defer r.Close()
	return writeIn(r, base, name, opt, write)
}

// WriteIn is Write for the file name below r, a slash-separated name relative to
// it whose directory exists; links in the directory are followed inside r only.
func WriteIn(r *os.Root, name string, opt Options, write func(*os.File) error) error {
	return writeIn(r, name, name, opt, write)
}

func writeIn(r *os.Root, name, shown string, opt Options, write func(*os.File) error) (err error) {
	if err := check(r, name, opt); err != nil {
		return wrap(shown, err)
	}
	dir, base := path.Split(name)
	if dir == "" {
		dir = "."
	}
	removeStale(r, dir, base)
	tmp, f, err := createTemp(r, dir, base)
	if err != nil {
		return wrap(shown, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			r.Remove(tmp)
		}
		if err != nil {
			err = wrap(shown, err)
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	perm := opt.Perm
	if perm == 0 {
		perm = 0o644
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	// Sync before the rename: a full disk or an I/O error shows here, while the
	// target still holds the old file, not after it was replaced by an empty one.
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := r.Rename(tmp, name); err != nil {
		return err
	}
	renamed = true
	return syncDir(r, dir)
}

func wrap(name string, err error) error {
	return fmt.Errorf("atomicfile: writing %s: %w", name, err)
}

// check refuses a target that exists and is not a regular file, and one that
// exists without opt.Force. The check and the rename are two steps: a target
// replaced by a device node between them is not detected (rename(2) has no flag
// for it).
func check(r *os.Root, name string, opt Options) error {
	fi, err := r.Lstat(name)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%w (%s)", ErrNotRegular, hostfs.FileKind(fi.Mode()))
	case err == nil && !opt.Force:
		return ErrExists
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return nil
}

// createTemp creates a new temporary file for base in dir, mode 0600, with
// O_EXCL: nothing that exists is opened.
func createTemp(r *os.Root, dir, base string) (string, *os.File, error) {
	var rnd [8]byte
	for range 100 {
		rand.Read(rnd[:])
		name := path.Join(dir, "."+base+TempMarker+hex.EncodeToString(rnd[:]))
		f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return name, f, err
	}
	return "", nil, errors.New("no unused temporary file name")
}

// syncDir makes a rename in dir durable. File systems that cannot sync a
// directory (EINVAL) have nothing to make durable.
func syncDir(r *os.Root, dir string) error {
	d, err := r.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// removeStale removes Write's temporary files for base in dir that are older
// than StaleAge. It is best effort: what cannot be listed or removed stays.
func removeStale(r *os.Root, dir, base string) {
	d, err := r.Open(dir)
	if err != nil {
		return
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return
	}
	prefix := "." + base + TempMarker
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > StaleAge {
			r.Remove(path.Join(dir, e.Name()))
		}
	}
}
