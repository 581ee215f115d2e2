// Package fakegdrdrv is an in-process model of the gdrdrv kernel module of
// NVIDIA GDRCopy and of the slice of the NVIDIA driver it calls, installed
// at the [gdrdrv.Syscalls] boundary so that code above it runs exactly as it
// does against /dev/gdrdrv.
//
// The model follows src/gdrdrv/gdrdrv.c of GDRCopy 2.6 rule by rule, and
// says which function each rule comes from: the ioctl dispatch and its errno
// values, handle generation, 64 KiB rounding, the checks of gdrdrv_mmap,
// mapping-type selection, the NVIDIA free callback, release on last close,
// the owner-process check and version gating (older drivers answer ENOTTY
// to newer commands). It even keeps the module's stale-handle lookup quirk
// (gdr_mr_from_handle_unlocked), so that a client relying on it is caught.
// Structures are decoded from raw bytes at the offsets of gdrdrv.h, not
// through the Go types of package gdrdrv, so the fake also cross-checks
// their layout.
//
// GPU memory is a memfd: cuMemAlloc/cuMemFree are [Module.Alloc] and
// [Module.Free], cuMemcpy is [Module.ReadDevice]/[Module.WriteDevice], and a
// BAR mapping is a real MAP_SHARED mapping of that memfd, so the client's
// mmap offsets and copies are exercised for real. A zapped mapping (after
// invalidation or unpin) raises SIGBUS on access, as on real hardware.
//
// The package is Linux-only; elsewhere it is empty.
package fakegdrdrv
