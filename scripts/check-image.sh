#!/usr/bin/env bash
# check-image.sh ARCHIVE VERSION: unpacks the linux/amd64 image from the OCI
# archive that "make image" wrote and runs the p2pcheck in it, in a chroot of
# the image's file system when run as root (as CI does), on a synthetic machine
# copied into it: --version must say VERSION, the report (--quick) must
# evaluate the machine, and the tree must name the GPUs from the image's own
# pci.ids. Run from the repository root.
set -euo pipefail
archive=$(realpath "$1")
version=$2
GO=${GO:-go}

d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
(cd deploy && "$GO" run ./cmd/p2pcheck-image unpack -i "$archive" -arch amd64 -o "$d/rootfs")
"$GO" run ./internal/testtools/fixture/cmd/mkfixture -o "$d/rootfs/fixture" dgx-h100-acs-off

if [[ $(id -u) == 0 ]]; then
    p2pcheck() { chroot "$d/rootfs" /usr/bin/p2pcheck "$@"; }
    root=/fixture
else
    echo "check-image: not root, so no chroot: running the image's binary with its pci.ids in place" >&2
    p2pcheck() { "$d/rootfs/usr/bin/p2pcheck" --pci-ids "$d/rootfs/usr/share/misc/pci.ids" "$@"; }
    root=$d/rootfs/fixture
fi

p2pcheck --version >"$d/version.txt"
cat "$d/version.txt"
if ! grep -q "^p2pcheck $version " "$d/version.txt"; then
    echo "check-image: the image's p2pcheck is not $version" >&2
    exit 1
fi
rc=0
p2pcheck --root "$root" --quick --no-color >"$d/report.txt" || rc=$?
tail -n 1 "$d/report.txt"
if [[ $rc != 0 ]]; then
    echo "check-image: the image's p2pcheck --quick exited $rc on a ready machine, want 0" >&2
    exit 1
fi
p2pcheck --root "$root" topo --no-color >"$d/topo.txt"
if ! grep -q 'NVIDIA Corporation' "$d/topo.txt"; then
    echo "check-image: the tree names no NVIDIA device: the image's pci.ids was not used" >&2
    exit 1
fi
echo "check-image: $archive: linux/amd64 p2pcheck $version runs from the image"
