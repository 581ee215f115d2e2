#!/bin/bash
# h200-live.sh: retake testdata/h200-1gpu-live/ on a machine with one NVIDIA GPU, as
# root, from a directory holding the NVML build of p2pcheck (make build: bin/p2pcheck)
# and gdrbench. Everything goes to $OUT/h200-1gpu-live/; nothing on the machine is
# changed (fix is a dry run). The GPU UUID the live report prints is replaced by
# GPU-redacted-0, as the snapshot's redaction does; $OUT/h200-1gpu-live.tar.gz holds it all.
set -u
here=$(cd "$(dirname "$0")" && pwd)
P=$here/p2pcheck
OUT=${OUT:-$PWD/out}
R=$OUT/h200-1gpu-live
mkdir -p "$R"
cd "$R" || exit 1

# logged PROMPT ARGS...: the command as the README shows it, its output (stdout and
# stderr, in order) and its exit code.
logged() {
	local prompt=$1
	shift
	echo "\$ $prompt"
	"$P" "$@" 2>&1
	echo "rc=$?"
}
redact() {
	local uuid
	uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -n1 | tr -d ' ')
	[ -n "$uuid" ] && sed -i "s/$uuid/GPU-redacted-0/g" "$@"
}

"$P" snapshot -o snapshot.tar.gz
for c in topo matrix pairs; do "$P" --format json "$c" >"$c.json"; done
# One GPU is what this machine is built with (without it, p2p has nothing to judge).
"$P" --format json report --expect gpus=1 >report.json
"$P" matrix >matrix.txt
"$P" topo >topo.txt
"$P" --quick --expect gpus=1 >report-quick.txt
{
	logged "sudo p2pcheck"
	logged "sudo p2pcheck --expect gpus=1" --expect gpus=1
	logged "sudo p2pcheck --expect gpus=1 --require gdrcopy" --expect gpus=1 --require gdrcopy
} >report.log
logged "p2pcheck nccl" nccl >nccl.log
logged "sudo p2pcheck fix" fix >fix.log
{
	"$P" --version
	"$here/gdrbench" --version
	nvidia-smi -L | sed 's/(UUID: [^)]*)/(UUID: redacted)/'
	uname -r
} >env.txt 2>&1
redact ./*.json ./*.txt ./*.log
ls -l
tar -czf "$OUT/h200-1gpu-live.tar.gz" -C "$OUT" h200-1gpu-live && rm -rf "$R"
