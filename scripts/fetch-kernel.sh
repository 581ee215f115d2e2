#!/bin/sh
# fetch-kernel.sh — put Debian's stock amd64 kernel where the vmtest tier finds it.
#
# Usage: scripts/fetch-kernel.sh [CACHE_DIR]
#
# CACHE_DIR defaults to $P2PKIT_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/p2pkit, the
# directory internal/testtools/vmtest searches. The package is the one Debian's metapackage
# linux-image-amd64 depends on today (override with P2PKIT_DEBIAN_KERNEL_PKG, e.g.
# linux-image-6.1.0-57-amd64). It is downloaded with apt-get download (no install,
# no root needed beyond apt's own access) and only boot/ and one module are unpacked:
#
#   CACHE_DIR/debian-kernel/<package>/boot/vmlinuz-<release>
#   CACHE_DIR/debian-kernel/vmlinuz -> <package>/boot/vmlinuz-<release>
#   CACHE_DIR/debian-kernel/pci-pf-stub.ko -> <package>/lib/modules/<release>/.../pci-pf-stub.ko
#
# pci-pf-stub is the one module the tier loads: Debian builds its NVMe driver as a
# module, so without it no driver would let the guest write sriov_numvfs.
#
# A package already unpacked is not fetched again. The script prints the kernel path.
set -eu

cache=${1:-${P2PKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/p2pkit}}
dir=$cache/debian-kernel

pkg=${P2PKIT_DEBIAN_KERNEL_PKG:-$(apt-cache depends linux-image-amd64 |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)}
if [ -z "$pkg" ]; then
	echo "fetch-kernel.sh: cannot tell which kernel linux-image-amd64 depends on (apt-get update first?)" >&2
	exit 1
fi

mkdir -p "$dir"
stub=kernel/drivers/pci/pci-pf-stub.ko
if ! ls "$dir/$pkg"/boot/vmlinuz-* "$dir/$pkg"/lib/modules/*/$stub >/dev/null 2>&1; then
	tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download "$pkg" >&2)
	mkdir -p "$tmp/root"
	dpkg-deb --fsys-tarfile "$tmp"/"$pkg"_*.deb |
		tar -x -C "$tmp/root" --wildcards ./boot "./lib/modules/*/$stub"
	rm -rf "${dir:?}/$pkg"
	mv "$tmp/root" "$dir/$pkg"
fi

kernel=$(ls "$dir/$pkg"/boot/vmlinuz-* | head -n 1)
ln -sfn "${kernel#"$dir"/}" "$dir/vmlinuz"
module=$(ls "$dir/$pkg"/lib/modules/*/$stub | head -n 1)
ln -sfn "${module#"$dir"/}" "$dir/pci-pf-stub.ko"
echo "$dir/vmlinuz"
