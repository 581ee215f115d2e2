#!/bin/bash
# nccl-device-offline.sh: issue #24's acceptance run on a machine with one NVIDIA
# GPU, PyTorch (NCCL inside) and no Go. Run it from a directory holding a
# p2pcheck binary (p2pcheck, else p2pcheck-static) and nccl-common.sh; every
# result goes to $OUT/h200-1gpu.tar.gz with a log, $OUT/run.log. It never stops
# half-way: each step's exit status is kept in steps.txt and the next one runs.
#
#   1. p2pcheck live: nccl (text and JSON), nccl --topo-xml, and a snapshot;
#      then the same nccl outputs from that snapshot, here;
#   2. NCCL, one rank, its own detection, with NCCL_TOPO_DUMP_FILE;
#   3. NCCL, one rank, with p2pcheck's XML as NCCL_TOPO_FILE;
#   4. NCCL, two ranks on the one GPU that NCCL takes for two hosts
#      (NCCL_HOSTID differs), so that its channels go over the network;
#   5. the same with settings NCCL prints (NCCL_NET_GDR_LEVEL, NCCL_P2P_LEVEL,
#      NCCL_GDRCOPY_ENABLE, NCCL_SHM_DISABLE) and NCCL's default subsystems;
#   6. p2pcheck nccl --topo-file on NCCL's dump.
# NCCL writes one log per process (NCCL_DEBUG_FILE); the host name in them is
# replaced by "h200vm" and the VM's address by 192.0.2.2.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=nccl-common.sh
. "$here/nccl-common.sh"
P=$here/p2pcheck
OUT=${OUT:-$PWD/out}
R=$OUT/h200-1gpu
mkdir -p "$R"
work=$(mktemp -d)
steps=$R/steps.txt
: >"$steps"
exec > >(tee "$OUT/run.log") 2>&1

# step NAME CMD...: run CMD, record its exit status.
step() {
	local name=$1
	shift
	local t0=$SECONDS
	"$@"
	local rc=$?
	echo "$name exit $rc ($((SECONDS - t0)) s)" | tee -a "$steps"
	return 0
}

if ! "$P" --version >"$R/p2pcheck-version.txt" 2>&1; then
	echo "p2pcheck does not run here; trying p2pcheck-static" | tee -a "$steps"
	P=$here/p2pcheck-static
	"$P" --version >"$R/p2pcheck-version.txt" 2>&1
fi
{
	date -u
	uname -a
	nvidia-smi -L
	nvidia-smi --query-gpu=driver_version,pci.bus_id --format=csv,noheader
	python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
	env | grep '^NCCL_' | sort
	ls -l /sys/class/net/ /sys/class/infiniband/
	cat /etc/nccl.conf ~/.nccl.conf
} >"$R/machine.txt" 2>&1
host=$(hostname)
addr=$(hostname -I 2>/dev/null | awk '{print $1}')
[ -n "$addr" ] || addr=no-address

# 1. p2pcheck, live, and on its own snapshot.
step nccl-text sh -c "'$P' nccl >'$R/p2pcheck-nccl.txt' 2>'$R/p2pcheck-nccl.stderr'"
step nccl-json sh -c "'$P' nccl --format json >'$R/p2pcheck-nccl.json' 2>>'$R/p2pcheck-nccl.stderr'"
step topo-xml "$P" nccl --topo-xml "$R/p2pcheck-topo.xml"
step snapshot "$P" snapshot -o "$R/snapshot.tar.gz"
step offline-text sh -c "'$P' --snapshot '$R/snapshot.tar.gz' nccl >'$R/offline-nccl.txt' 2>&1"
step offline-json sh -c "'$P' --snapshot '$R/snapshot.tar.gz' nccl --format json >'$R/offline-nccl.json' 2>&1"
step offline-topo-xml "$P" --snapshot "$R/snapshot.tar.gz" nccl --topo-xml "$R/offline-topo.xml"
diff "$R/p2pcheck-nccl.txt" "$R/offline-nccl.txt" >"$R/live-offline.diff"
echo "live vs offline text: $(wc -l <"$R/live-offline.diff") diff lines" | tee -a "$steps"

# NCCL runs: LOG NP SECONDS [VAR=VALUE...]
write_allreduce "$work/allreduce.py"
cat >"$work/twohosts.py" <<'PY'
import os, torch, torch.distributed as dist
# Both ranks use the one GPU; NCCL takes them for two hosts (getHostHash).
os.environ["NCCL_HOSTID"] = "h200-rank" + os.environ.get("RANK", "0")
torch.cuda.set_device(0)
dist.init_process_group("nccl")
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("rank", dist.get_rank(), "sum", x[0].item())
dist.destroy_process_group()
PY
nccl_run() {
	local name=$1 np=$2 limit=$3 script=$4
	shift 4
	rm -rf "$work/logs" && mkdir -p "$work/logs"
	env NCCL_DEBUG=INFO NCCL_DEBUG_FILE="$work/logs/nccl.%h.%p.log" "$@" \
		timeout "$limit" torchrun --standalone --nproc_per_node="$np" "$script" >"$work/$name.out" 2>&1
	local rc=$?
	echo "$name exit $rc" | tee -a "$steps"
	tail -3 "$work/$name.out"
	local i=0
	for f in "$work"/logs/nccl.*.log; do
		[ -e "$f" ] || continue
		sed -e "s/$host/h200vm/g" -e "s/$addr/192.0.2.2/g" "$f" >"$R/$name-$i.log"
		i=$((i + 1))
	done
	return "$rc"
}
sub=INIT,GRAPH,NET,ENV
step nccl-1rank nccl_run nccl-info 1 100 "$work/allreduce.py" NCCL_DEBUG_SUBSYS=$sub NCCL_TOPO_DUMP_FILE="$R/nccl-topo.xml"
step nccl-1rank-topofile nccl_run nccl-info-topofile 1 100 "$work/allreduce.py" NCCL_DEBUG_SUBSYS=$sub \
	NCCL_TOPO_FILE="$R/p2pcheck-topo.xml" NCCL_TOPO_DUMP_FILE="$R/nccl-topo-topofile.xml"
if nccl_run nccl-2rank 2 120 "$work/twohosts.py" NCCL_DEBUG_SUBSYS=$sub NCCL_TOPO_DUMP_FILE="$R/nccl-topo-2rank.xml"; then
	step nccl-2rank-settings nccl_run nccl-2rank-settings 2 120 "$work/twohosts.py" \
		NCCL_NET_GDR_LEVEL=PHB NCCL_P2P_LEVEL=SYS NCCL_GDRCOPY_ENABLE=1 NCCL_SHM_DISABLE=1
else
	echo "nccl-2rank-settings skipped: the two-rank run failed" | tee -a "$steps"
fi
for f in "$R"/nccl-topo*.xml; do
	[ -e "$f" ] && sed -i -e "s/$host/h200vm/g" "$f"
done

# 6. p2pcheck on NCCL's own dump.
step topo-file sh -c "'$P' nccl --topo-file '$R/nccl-topo.xml' --net-plugin Socket --format json >'$R/topofile-nccl.json' 2>&1"

echo "== NCCL's path lines and p2pcheck's"
grep -ah -E 'NCCL INFO (GPU|NET)/[0-9a-f]+-[0-9a-f]+ :' "$R"/nccl-info-0.log | sed 's/^.*NCCL INFO //' | sort -u
python3 -c 'import json,sys; print("\n".join(p.rstrip() for p in json.load(open(sys.argv[1]))["paths"]))' "$R/p2pcheck-nccl.json"
echo "== channels and GPU Direct RDMA lines"
grep -ah -E 'via |GPU Direct RDMA|GDRCOPY|Using network' "$R"/nccl-*.log | sed 's/^.*NCCL INFO //' | sort | uniq -c | head -30
echo "== XML (-NCCL +p2pcheck)"
diff "$R/nccl-topo.xml" "$R/p2pcheck-topo.xml"
cat "$steps"
rm -rf "$work"
tar -C "$OUT" -czf "$OUT/h200-1gpu.tar.gz" h200-1gpu && rm -rf "$R"
ls -l "$OUT"
