package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/p2pkit/p2pkit/hostfs"
)

// tempMarker is in the name of every temporary file writeFileAtomic makes:
// ".NAME.p2pcheck-tmp-RANDOM" beside NAME, recognisable as p2pcheck's.
const tempMarker = ".p2pcheck-tmp-"

// staleTempAge is how old a temporary file of writeFileAtomic must be before a
// later write of the same target removes it as left over from a killed run. A
// write takes milliseconds; the margin keeps a concurrent writer's file safe.
const staleTempAge = 10 * time.Minute

// errNotRegular is returned for an output target that exists and is not a
// regular file: a device node, a directory, a symbolic link, a FIFO.
var errNotRegular = errors.New("exists and is not a regular file")

// writeFileAtomic writes name through a temporary file in the same directory
// and renames it into place, so a reader never sees a partial file and a
// failed run leaves nothing behind:
//
//   - a target that exists and is not a regular file is refused: renaming over
//     /dev/null or a symbolic link would replace it with a regular file;
//   - without force an existing file is kept and reported (a usage error);
//   - the file is synced before the rename and the directory after it, so a
//     crash leaves the old file or the new one, never an empty one;
//   - the temporary file is removed on every error path, and temporary files
//     of this target older than staleTempAge (from a run killed with SIGKILL)
//     are removed first.
//
// The check of the target and the rename are two steps: a target replaced by
// a device node between them is not detected (rename(2) has no flag for it).
func writeFileAtomic(name string, force bool, write func(*os.File) error) (err error) {
	switch fi, err := os.Lstat(name); {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("writing %s: %w (%s)", name, errNotRegular, hostfs.FileKind(fi.Mode()))
	case err == nil && !force:
		return usageError("%s exists (use --force to replace it)", name)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("writing %s: %w", name, err)
	}
	dir, base := filepath.Dir(name), filepath.Base(name)
	removeStaleTemps(dir, base)
	f, err := os.CreateTemp(dir, "."+base+tempMarker+"*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			os.Remove(tmp)
		}
		if err != nil {
			err = fmt.Errorf("writing %s: %w", name, err)
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	renamed = true
	return syncDir(dir)
}

// syncDir makes a rename in dir durable. File systems that cannot sync a
// directory (EINVAL) have nothing to make durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// removeStaleTemps removes writeFileAtomic's temporary files for base in dir
// that are older than staleTempAge. It is best effort: what cannot be listed
// or removed stays.
func removeStaleTemps(dir, base string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := "." + base + tempMarker
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTempAge {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
