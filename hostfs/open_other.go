//go:build !unix

package hostfs

import "os"

// openFlags opens attribute files read-only.
const openFlags = os.O_RDONLY
