#!/bin/bash
# nccl-device.sh: acceptance run of 'p2pcheck nccl' against NCCL itself on a GPU
# machine with PyTorch (NCCL inside) and no Go. Run from the directory holding a
# p2pcheck binary; results go to $OUT (default ./out).
#
#   1. a one-rank all-reduce with NCCL_DEBUG=INFO and NCCL_TOPO_DUMP_FILE:
#      NCCL's own path lines and topology;
#   2. p2pcheck nccl (text and JSON) and p2pcheck nccl --topo-xml;
#   3. the same all-reduce with NCCL_TOPO_FILE pointing at p2pcheck's XML;
#   4. a p2pcheck snapshot of the machine, for the unit tests.
# It then compares NCCL's path lines from 1 and 3 and p2pcheck's.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=nccl-common.sh
. "$here/nccl-common.sh"
P=$here/p2pcheck
OUT=${OUT:-$PWD/out}
NP=${NP:-1}
mkdir -p "$OUT"
work=$(mktemp -d)
write_allreduce "$work/allreduce.py"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
lib=$(find_libnccl)
echo "libnccl: $lib"

# allreduce LOGFILE [VAR=VALUE...]: run the all-reduce, keep NCCL's INFO lines
# without the host:pid:tid prefix.
allreduce() {
	log=$1; shift
	env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,NET,ENV "$@" \
		torchrun --standalone --nproc_per_node="$NP" "$work/allreduce.py" >"$work/raw.log" 2>&1
	echo "torchrun exit $?"
	nccl_lines "$work/raw.log" "$log"
	grep -a -v 'NCCL INFO' "$work/raw.log" | tail -5
}

allreduce "$OUT/nccl-info.log" NCCL_TOPO_DUMP_FILE="$OUT/nccl-topo.xml"
"$P" nccl --nccl-lib "$lib" >"$OUT/p2pcheck-nccl.txt" 2>&1; echo "p2pcheck nccl exit $?"
"$P" nccl --nccl-lib "$lib" --format json >"$OUT/p2pcheck-nccl.json"; echo "p2pcheck nccl json exit $?"
"$P" nccl --topo-xml "$OUT/p2pcheck-topo.xml"; echo "p2pcheck nccl --topo-xml exit $?"
allreduce "$OUT/nccl-info-topofile.log" NCCL_TOPO_FILE="$OUT/p2pcheck-topo.xml" NCCL_TOPO_DUMP_FILE="$OUT/nccl-topo-topofile.xml"
"$P" snapshot -o "$OUT/snapshot.tar.gz"; echo "snapshot exit $?"

paths() { grep -a -E '^NCCL INFO (GPU|NET)/[0-9a-f]+-[0-9a-f]+ :' "$1" | sed 's/^NCCL INFO //; s/ *$//' | sort -u; }
paths "$OUT/nccl-info.log" >"$work/own"
paths "$OUT/nccl-info-topofile.log" >"$work/file"
python3 -c 'import json,sys; print("\n".join(p.rstrip() for p in json.load(open(sys.argv[1]))["paths"]))' "$OUT/p2pcheck-nccl.json" | sort -u >"$work/pred"
echo "== NCCL's own detection"; cat "$work/own"
echo "== NCCL with p2pcheck's XML"; diff "$work/own" "$work/file" && echo same
echo "== p2pcheck's prediction"; diff "$work/own" "$work/pred" && echo same
echo "== p2pcheck's XML"; cat "$OUT/p2pcheck-topo.xml"
echo "== NCCL's XML"; cat "$OUT/nccl-topo.xml"
grep -a -E 'GPU Direct RDMA|via |GDRCOPY|Using network' "$OUT/nccl-info.log" | sort | uniq -c | head -20
rm -rf "$work"
