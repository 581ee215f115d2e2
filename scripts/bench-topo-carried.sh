#!/bin/bash
# bench-topo-carried.sh DIR [LOADS]: make bench-topo's table on a machine reached with
# only what is carried to it (the H200 host): DIR holds p2pcheck, topobench, and lspci
# with pci.ids and its shared libraries laid out as scripts/topo-timing.sh says.
# LOADS is topobench's -load (default 0,1,8: quiet, one busy loop, eight).
set -u
d=$(cd "${1:?usage: bench-topo-carried.sh DIR [LOADS]}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/carried-lspci.sh"
LD_LIBRARY_PATH=/tmp/L "$d/topobench" -p2pcheck "$d/p2pcheck" -lspci /tmp/L/lspci -all -load "${2:-0,1,8}" -markdown
