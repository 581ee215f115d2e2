#!/bin/bash
# nccl-device-conf.sh: checks on a GPU machine that 'p2pcheck nccl' resolves NCCL_*
# settings as NCCL does (src/misc/param.cc: environment, then NCCL_CONF_FILE, then
# /etc/nccl.conf), and refreshes p2pcheck's default output. Run from the directory
# holding a p2pcheck binary; results go to $OUT. /etc/nccl.conf is restored.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=nccl-common.sh
. "$here/nccl-common.sh"
P=$here/p2pcheck
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
work=$(mktemp -d)
write_allreduce "$work/allreduce.py"
lib=$(find_libnccl)
"$P" nccl >"$OUT/p2pcheck-nccl.txt" 2>&1; echo "p2pcheck nccl exit $?"
"$P" nccl --format json >"$OUT/p2pcheck-nccl.json"; echo "p2pcheck nccl json exit $?"
grep version_source "$OUT/p2pcheck-nccl.json"

[ -e /etc/nccl.conf ] && cp -p /etc/nccl.conf "$work/etc.bak"
printf 'NCCL_P2P_LEVEL=SYS\nNCCL_IGNORE_CPU_AFFINITY=1\n' >/etc/nccl.conf
printf '# user file\nNCCL_P2P_LEVEL=PHB\nNCCL_GDRCOPY_ENABLE=0\n' >"$work/user.conf"
export NCCL_CONF_FILE=$work/user.conf NCCL_GDRCOPY_ENABLE=1
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,NET,ENV torchrun --standalone --nproc_per_node=1 "$work/allreduce.py" >"$work/raw.log" 2>&1
echo "torchrun exit $?"
nccl_lines "$work/raw.log" "$OUT/nccl-info-conf.log"
"$P" nccl --format json --nccl-lib "$lib" >"$OUT/p2pcheck-nccl-conf.json"; echo "p2pcheck nccl conf exit $?"
rm -f /etc/nccl.conf
[ -e "$work/etc.bak" ] && cp -p "$work/etc.bak" /etc/nccl.conf
echo "== NCCL"; grep -a -E 'set by environment|GDRCOPY|gdrapi|GDR' "$OUT/nccl-info-conf.log" | sort | uniq -c
echo "== p2pcheck"; python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); [print(s) for s in r["settings"]]; print(r["gdrcopy"])' "$OUT/p2pcheck-nccl-conf.json"
rm -rf "$work"
