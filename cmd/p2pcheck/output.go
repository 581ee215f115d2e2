package main

import (
	"errors"
	"os"

	"github.com/p2pkit/p2pkit/internal/atomicfile"
)

// writeFileAtomic writes the output file name with write through package
// atomicfile, the one writer of every output: a target that is not a regular file
// is refused, a failed write leaves the old file, and without force an existing
// file is kept and reported (a usage error).
func writeFileAtomic(name string, force bool, write func(*os.File) error) error {
	err := atomicfile.Write(name, atomicfile.Options{Force: force}, write)
	if errors.Is(err, atomicfile.ErrExists) {
		return usageError("%s exists (use --force to replace it)", name)
	}
	return err
}
