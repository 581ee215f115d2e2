// Package hugepage asks Linux to back a range of memory with transparent huge pages
// (madvise(2) MADV_HUGEPAGE). Elsewhere it has nothing to offer.
package hugepage
