package sysfs

import (
	"errors"
	"io/fs"
	"path"
)

// ConfigMissing reports whether err, a pcie.Record's Err, says that the function's
// config file does not exist: a tree captured without config files (a ghw
// snapshot, a container that does not expose them), as opposed to one cut to 64
// bytes for an unprivileged reader, which is no error.
func ConfigMissing(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && path.Base(pe.Path) == "config" && errors.Is(err, fs.ErrNotExist)
}
