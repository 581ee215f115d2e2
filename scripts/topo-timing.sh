#!/bin/bash
# topo-timing.sh DIR: `p2pcheck topo` of two builds against `lspci -tv` on this machine's
# live tree, in interleaved batches of 50 runs (bash's time: wall, user, system).
# DIR holds p2pcheck-new, p2pcheck-base, pci.ids, and lspci with its shared libraries
# under DIR/lib (ld-linux-x86-64.so.2 among them), so that it runs where pciutils is
# not installed, e.g. a GPU machine reached with only what is carried to it:
#
#   mkdir -p d/lib && cp /usr/bin/lspci /usr/share/misc/pci.ids d/
#   ldd /usr/bin/lspci | awk '/=>/{print $3}' | xargs cp -Lt d/lib; cp -L /lib64/ld-linux-x86-64.so.2 d/lib
#
# Writes lspci's output to $OUT (default /tmp). testdata/bench/h200-live-topo.log is
# one run.
set -u
d=${1:?usage: topo-timing.sh DIR}
out=${OUT:-/tmp}
lspci() { "$d/lib/ld-linux-x86-64.so.2" --library-path "$d/lib" "$d/lspci" "$@"; }
lspci -tv -i "$d/pci.ids" > "$out/lspci.txt" 2>&1; echo "lspci rc=$?"
TIMEFORMAT='%R s wall, %U user, %S sys'
for r in 1 2 3 4 5 6 7 8; do
  echo "round $r"
  for c in new base lspci; do
    printf '  %-6s ' "$c"
    case $c in
      lspci) time (for i in $(seq 50); do lspci -tv -i "$d/pci.ids" >/dev/null; done) ;;
      *) time (for i in $(seq 50); do "$d/p2pcheck-$c" --no-color --no-nvml --pci-ids "$d/pci.ids" topo >/dev/null 2>&1; done) ;;
    esac
  done
done 2>&1
