#!/usr/bin/env bash
# compare-outputs.sh OLD_BIN NEW_BIN [OUTDIR]
#
# Runs two p2pcheck binaries over every synthetic machine of internal/testtools/fixture
# (written with mkfixture) and every snapshot under testdata/, with every command
# in text and JSON (report, --quick, --require, topo, pairs, pairs --all, pair,
# matrix, nccl, fix, gdr, and the --prometheus and --nfd files), and diffs what
# they print, their exit codes and the files they write. Run it from the
# repository root. The run's time is the only thing normalised (timestamps in
# the JSON, the textfile's run time and duration, the labels' expiry).
#
# It prints one line per differing output and exits 1 when any differs; the
# outputs stay under OUTDIR (default: a new temporary directory) as
# OUTDIR/{old,new}/<machine>/<command> for inspection with diff -r.
#
# Environment: GO (the go command), MACHINES (a space-separated subset of the
# fixture machines and snapshot paths; default all), SKIP_ALL_PAIRS=1 to leave
# out pairs --all (slow on the large machine).
set -euo pipefail

if [[ $# -lt 2 ]]; then
	echo "usage: $0 OLD_BIN NEW_BIN [OUTDIR]" >&2
	exit 64
fi
old=$(realpath "$1")
new=$(realpath "$2")
out=${3:-$(mktemp -d /tmp/compare-outputs.XXXXXX)}
GO=${GO:-go}
mkdir -p "$out"
out=$(realpath "$out")

fx="$out/fixtures"
if [[ ! -d $fx ]]; then
	mkdir -p "$fx"
	"$GO" build -o "$out/mkfixture" ./internal/testtools/fixture/cmd/mkfixture
	for m in $("$out/mkfixture" -list); do
		"$out/mkfixture" -o "$fx/$m" "$m"
	done
fi

# Each target is "--root DIR" or "--snapshot FILE", with a name for its outputs.
declare -a names=() args=()
if [[ -n ${MACHINES:-} ]]; then
	for m in $MACHINES; do
		if [[ -f $m ]]; then
			names+=("$(echo "${m%/snapshot.tar.gz}" | tr / _)"); args+=("--snapshot $(realpath "$m")")
		else
			names+=("$m"); args+=("--root $fx/$m")
		fi
	done
else
	for d in "$fx"/*/; do
		m=$(basename "$d")
		names+=("$m"); args+=("--root $fx/$m")
	done
	while IFS= read -r s; do
		names+=("$(echo "${s%/snapshot.tar.gz}" | tr / _)"); args+=("--snapshot $(realpath "$s")")
	done < <(find testdata -name '*.tar.gz' | LC_ALL=C sort)
fi

norm() {
	sed -E -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})/TIMESTAMP/g' \
		-e 's/^(p2pcheck_last_run_timestamp_seconds|p2pcheck_run_duration_seconds) .*/\1 TIME/' "$@"
}

# run BIN DIR NAME ARGS...: one command's stdout, stderr and exit code.
run() {
	local bin=$1 dir=$2 name=$3
	shift 3
	local rc=0
	(cd "$dir" && NO_COLOR=1 "$bin" "$@" >"$name.out" 2>"$name.err") || rc=$?
	echo "$rc" >"$dir/$name.rc"
	norm -i "$dir/$name.out" "$dir/$name.err"
}

# pairsOf FILE: the provider and client of the first and the last pair, and of
# the first pair with a fix, the first not-supported and the first unknown one,
# from a pairs JSON.
pairsOf() {
	jq -r '[.pairs[0], .pairs[-1], (.pairs | map(select(.fix != null)))[0],
		(.pairs | map(select(.map_type == "not-supported")))[0], (.pairs | map(select(.map_type == "unknown")))[0]]
		| map(select(. != null) | .provider + " " + .client) | unique | .[]' "$1" 2>/dev/null || true
}

for side in old new; do
	bin=$old
	[[ $side == new ]] && bin=$new
	for i in "${!names[@]}"; do
		name=${names[$i]}
		# shellcheck disable=SC2206
		src=(${args[$i]})
		d="$out/$side/$name"
		rm -rf "$d"
		mkdir -p "$d"
		for fmt in text json; do
			run "$bin" "$d" "report.$fmt" "${src[@]}" --format "$fmt"
			run "$bin" "$d" "quick.$fmt" "${src[@]}" --quick --format "$fmt"
			run "$bin" "$d" "require-all.$fmt" "${src[@]}" --require p2p,gdr,gdrcopy,nvme-p2p --format "$fmt"
			run "$bin" "$d" "require-p2p.$fmt" "${src[@]}" --require p2p --format "$fmt"
			run "$bin" "$d" "topo.$fmt" "${src[@]}" topo --format "$fmt"
			run "$bin" "$d" "pairs.$fmt" "${src[@]}" pairs --format "$fmt"
			run "$bin" "$d" "matrix.$fmt" "${src[@]}" matrix --format "$fmt"
			run "$bin" "$d" "nccl.$fmt" "${src[@]}" nccl --format "$fmt"
			run "$bin" "$d" "fix.$fmt" "${src[@]}" fix --format "$fmt"
			run "$bin" "$d" "gdr.$fmt" "${src[@]}" gdr --format "$fmt"
		done
		if [[ ${SKIP_ALL_PAIRS:-} != 1 ]]; then
			run "$bin" "$d" "pairs-all.json" "${src[@]}" pairs --all --format json
		fi
		run "$bin" "$d" "fail-on-warn.text" "${src[@]}" --fail-on warn
		rm -f "$d/textfile.prom" "$d/labels.nfd"
		run "$bin" "$d" "files.text" "${src[@]}" --prometheus textfile.prom --nfd labels.nfd
		# A second run reads the first run's textfile back (aer_errors' growth).
		run "$bin" "$d" "files-again.text" "${src[@]}" --prometheus textfile.prom
		[[ -f $d/textfile.prom ]] && norm -i "$d/textfile.prom"
		[[ -f $d/labels.nfd ]] && norm -i "$d/labels.nfd"
		# The pairs named come from the old binary's output, so both explain the same.
		n=0
		while read -r p c; do
			n=$((n + 1))
			for fmt in text json; do
				run "$bin" "$d" "pair$n.$fmt" "${src[@]}" pair "$p" "$c" --format "$fmt"
			done
		done < <(pairsOf "$out/old/$name/pairs.json.out")
	done
done

status=0
while IFS= read -r f; do
	rel=${f#"$out/old/"}
	if [[ ! -f $out/new/$rel ]]; then
		echo "missing in new: $rel"
		status=1
	elif ! cmp -s "$f" "$out/new/$rel"; then
		echo "differs: $rel"
		status=1
	fi
done < <(find "$out/old" -type f | LC_ALL=C sort)
while IFS= read -r f; do
	rel=${f#"$out/new/"}
	[[ -f $out/old/$rel ]] || { echo "only in new: $rel"; status=1; }
done < <(find "$out/new" -type f | LC_ALL=C sort)
n=$(find "$out/old" -type f | wc -l)
if [[ $status == 0 ]]; then
	echo "compare-outputs: $n outputs identical over ${#names[@]} machines ($out)"
else
	echo "compare-outputs: differences above; diff -r $out/old $out/new" >&2
fi
exit $status
