//go:build !unix

package sysfs

import "os"

// openFlags opens attribute files read-only.
const openFlags = os.O_RDONLY
