// Package gdrdrv is the raw user-space ABI of the gdrdrv kernel module of
// NVIDIA GDRCopy: the ioctl command words, the request structures with the
// exact size and field offsets the module copies in and out, the version and
// feature-gate constants, and one typed wrapper per ioctl.
//
// Every constant and layout mirrors src/gdrdrv/gdrdrv.h of GDRCopy 2.6 (the
// ABI has not changed since 2.5.2). The module lays these structures out
// identically on amd64 and arm64; each structure carries
// [structs.HostLayout] and names its C padding explicitly, and the package
// tests assert every size and offset against the header.
//
// All system calls go through the [Syscalls] boundary. [Host] reaches the
// kernel; tests install a fake of the module at the same boundary, so the
// code above it runs unchanged. Apart from that fake, this is the only
// package of gdrcopy that imports golang.org/x/sys/unix.
package gdrdrv
