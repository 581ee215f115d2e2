#!/bin/bash
# nccl-2gpu.sh: acceptance 2 of 'p2pcheck nccl' on a machine with two or more GPUs
# and PyTorch (NCCL inside). For each NCCL setting below it runs a one-line
# all-reduce with torchrun --nproc_per_node=$NP (default 2) at NCCL_DEBUG=INFO,
# reads the transport NCCL printed for every channel ("Channel xx/y : a[d] -> b[d]
# via P2P/...", "via SHM/...", "via NET/...") and compares it with what
# 'p2pcheck nccl --format json' predicts under the same setting. Run it from the
# directory holding a p2pcheck binary. $OUT (default ./out) receives, per setting,
# NCCL's log (nccl-<name>.log, host prefix removed) and p2pcheck's JSON
# (p2pcheck-<name>.json), plus a snapshot of the machine: commit them under
# testdata/nccl/h200-2gpu/ and TestH200TwoGPULogs checks them in the unit tier.
# Exit status: 0 when every setting matched.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=nccl-common.sh
. "$here/nccl-common.sh"
P=$here/p2pcheck
OUT=${OUT:-$PWD/out}
NP=${NP:-2}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
write_allreduce "$work/allreduce.py"
lib=$(find_libnccl)
libarg=()
[ -n "$lib" ] && libarg=(--nccl-lib "$lib")

# name and settings, one per line.
settings='default
p2p-disable NCCL_P2P_DISABLE=1
p2p-level-loc NCCL_P2P_LEVEL=LOC
shm-disable-p2p-disable NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1
p2p-use-cuda-memcpy NCCL_P2P_USE_CUDA_MEMCPY=1'

fail=0
while read -r name vars; do
	# shellcheck disable=SC2086 # vars is a list of VAR=VALUE words
	env $vars NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,NET,ENV \
		torchrun --standalone --nproc_per_node="$NP" "$work/allreduce.py" >"$work/raw.log" 2>&1
	rc=$?
	nccl_lines "$work/raw.log" "$OUT/nccl-$name.log"
	# shellcheck disable=SC2086
	env $vars "$P" nccl --format json "${libarg[@]}" >"$OUT/p2pcheck-$name.json"
	python3 - "$name" "$rc" "$OUT/nccl-$name.log" "$OUT/p2pcheck-$name.json" <<'PY' || fail=1
import json, re, sys
name, rc, log, pred = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
want = {(p["from"], p["to"]): p["via"] for p in json.load(open(pred))["gpu_pairs"]}
chan = re.compile(r"Channel \d+(?:/\d+)? : (\d+)\[\d+\] -> (\d+)\[\d+\] (?:\[(?:send|receive)\] )?via (\S+)")
seen, bad = {}, []
for line in open(log, errors="replace"):
    m = chan.search(line)
    if not m:
        continue
    pair, via = (int(m[1]), int(m[2])), m[3]
    seen.setdefault(pair, set()).add(via)
    w = want.get(pair)
    # NCCL adds the device and flags after NET/<plugin> (NET/Socket/0, NET/IB/1/GDRDMA).
    if w is None or not (via == w or via.startswith(w + "/")):
        bad.append(f"{pair}: NCCL via {via}, predicted {w}")
ok = rc == 0 and seen and not bad
print(f"{'PASS' if ok else 'FAIL'} {name}: torchrun exit {rc}; NCCL {dict((f'{a}->{b}', sorted(v)) for (a, b), v in seen.items())}; predicted {dict((f'{a}->{b}', v) for (a, b), v in want.items())}")
for b in bad[:5]:
    print("   ", b)
sys.exit(0 if ok else 1)
PY
done <<<"$settings"
"$P" snapshot -o "$OUT/snapshot.tar.gz" >/dev/null
exit $fail
