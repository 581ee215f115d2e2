#!/bin/bash
# heap-timing.sh DIR: two p2pcheck builds (DIR/p2pcheck-base, DIR/p2pcheck-new) side by
# side on trees of 68 and 1,028 functions and their snapshots, quiet and with 8 busy
# loops (scripts/cpu-split.py: wall, CPU and page faults, 31 interleaved rounds), then
# DIR/topobench of the new build under 8 and 16 busy loops. DIR also holds mkfixture,
# pci.ids and lspci with its shared libraries, laid out as scripts/topo-timing.sh says,
# so that it runs on a machine reached with only what is carried (the H200 host). The
# trees go to /tmp. testdata/bench/h200-heap-2026-12-03.log is one run.
set -u
d=$(cd "${1:?usage: heap-timing.sh DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/carried-lspci.sh"
[ -d /tmp/large ] || "$d/mkfixture" -o /tmp/large large >/dev/null || exit 1
[ -d /tmp/small ] || "$d/mkfixture" -o /tmp/small dgx-h100 >/dev/null || exit 1
B=$d/p2pcheck-base N=$d/p2pcheck-new
for t in large small; do "$B" --root /tmp/$t snapshot -o /tmp/$t-snap.tar.gz >/dev/null 2>&1; done
ls -l /tmp/*-snap.tar.gz
split() {
	local args=() c
	for c in "version	--version" "small topo	--root /tmp/small --no-color topo" "small quick	--root /tmp/small --quick" \
		"large topo	--root /tmp/large --no-color topo" "large quick	--root /tmp/large --quick" \
		"large snap	--snapshot /tmp/large-snap.tar.gz --no-color topo" "small snap	--snapshot /tmp/small-snap.tar.gz --no-color topo"; do
		args+=("base ${c%%	*}		$B ${c#*	}" "new ${c%%	*}		$N ${c#*	}")
	done
	python3 "$here/cpu-split.py" "$1" "${args[@]}" \
		"lspci -tv	LD_LIBRARY_PATH=/tmp/L	/tmp/L/lspci -tv -A linux-sysfs -O sysfs.path=/tmp/large/sys/bus/pci"
}
loops() { for _ in $(seq "$1"); do (while :; do :; done) & done; sleep 1; }
echo "== quiet"; split 31
loops 8
echo "== 8 busy loops"; split 31
echo "== topobench, new, 8 busy loops"; LD_LIBRARY_PATH=/tmp/L "$d/topobench" -p2pcheck "$N" -lspci /tmp/L/lspci -root /tmp/large -rounds 21
kill $(jobs -p) 2>/dev/null
loops 16
echo "== topobench, new, 16 busy loops"; LD_LIBRARY_PATH=/tmp/L "$d/topobench" -p2pcheck "$N" -lspci /tmp/L/lspci -root /tmp/large -rounds 21
kill $(jobs -p) 2>/dev/null
wait 2>/dev/null
