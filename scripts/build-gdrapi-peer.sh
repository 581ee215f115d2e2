#!/bin/bash
# build-gdrapi-peer.sh GDRCOPY_SRC OUT: builds OUT, the libgdrapi peer of
# `gdrbench apiperf --copies` (cmd/gdrbench/gdrapi-peer/gdrapi_peer.c), against
# the gdrcopy source tree GDRCOPY_SRC (a clone of https://github.com/NVIDIA/gdrcopy,
# e.g. at tag v2.6). Its src/gdrapi.c, src/cuda_wrapper.c and src/memcpy_*.c are
# compiled unchanged, each memcpy_*.c with the instruction-set flag gdrcopy's
# src/Makefile gives it, at -O2 as there. CC defaults to cc.
set -eu
src=$(cd "${1:?usage: build-gdrapi-peer.sh GDRCOPY_SRC OUT}" && pwd)
out=${2:?usage: build-gdrapi-peer.sh GDRCOPY_SRC OUT}
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}
for f in include/gdrapi.h src/gdrapi.c src/gdrapi_internal.h src/gdrdrv/gdrdrv.h; do
	[ -e "$src/$f" ] || { echo "build-gdrapi-peer.sh: $src has no $f: not a gdrcopy source tree" >&2; exit 2; }
done
case $(uname -m) in
x86_64) arch=X86 ;;
aarch64) arch=ARM64 ;;
*) echo "build-gdrapi-peer.sh: gdrcopy's copy routines are built for x86_64 and aarch64, not $(uname -m)" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-O2 -I "$src/include" -I "$src/src" -I "$src/src/gdrdrv" -D GDRAPI_ARCH=$arch)
objs=()
compile() { # compile FILE [FLAG]: one object of gdrcopy's source
	local o=$work/$(basename "$1" .c).o
	"$cc" "${flags[@]}" ${2:+"$2"} -c "$src/src/$1" -o "$o"
	objs+=("$o")
}
if [ $arch = X86 ]; then
	if "$cc" -mmovdir64b -E - </dev/null >/dev/null 2>&1; then
		flags+=(-D COMPILED_MOVDIR64B=1)
		compile memcpy_movdir64b.c -mmovdir64b
	else
		flags+=(-D COMPILED_MOVDIR64B=0)
	fi
	compile memcpy_sse.c -msse
	compile memcpy_sse41.c -msse4.1
	compile memcpy_avx.c -mavx
	compile memcpy_avx2.c -mavx2
	compile memcpy_avx512.c -mavx512f
else
	if "$cc" -march=armv9-a+ls64 -E - </dev/null >/dev/null 2>&1 && [ -e "$src/src/memcpy_ls64.c" ]; then
		flags+=(-D COMPILED_LS64=1)
		compile memcpy_ls64.c -march=armv9-a+ls64
	else
		flags+=(-D COMPILED_LS64=0)
	fi
	compile memcpy_neon.c
fi
compile cuda_wrapper.c
"$cc" "${flags[@]}" -o "$out" "$here/../cmd/gdrbench/gdrapi-peer/gdrapi_peer.c" "${objs[@]}" -lpthread -ldl
