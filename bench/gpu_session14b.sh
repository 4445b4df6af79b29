#!/usr/bin/env bash
# Session 14's second GPU call, one H200:
#   1. SimCLR at 24 GiB (allocator scope) with --worker: issue 12's worker-mode target (<= 25 s)
#   2. the zoo's missing truth, Lightning on the whole card (fresh-process bisection, bench/fresh_bisect.py),
#      then batchfit's search of it (preload), cut at LCARD_S (480 s)
# Logs in WORK, tarred into OUTDIR/all.tgz with summary.txt; the truth file as the zoo left it.
# Usage: bench/gpu_session14b.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s14b}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
"$bf" search --no-db --json --memory-limit 24GiB --memory-limit-scope allocator --steps 2 --worker \
	--log-dir "$w/logs-worker" -- python3 examples/simclr_resnet50/train.py --batch-size {} \
	>"$w/worker.json" 2>"$w/worker.err"
echo "worker: exit $? $(python3 bench/record_line.py "$w/worker.json")" >"$w/worker.txt"
timeout "${LCARD_S:-480}" python3 bench/zoo.py --batchfit "$bf" --out "$w/lcard" --truth --conditions card \
	--workloads lightning --modes preload >"$w/lcard.out" 2>&1
echo "lightning card: exit $?" >>"$w/lcard.out"
cp bench/zoo-truth.json "$w/zoo-truth.json"
{
	cat "$w/worker.txt"
	tail -5 "$w/worker.err"
	echo "== lightning card"
	for f in "$w/lcard"/*.json; do
		case $f in */zoo.json) continue ;; esac
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/lcard.out"
	python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])).get("lightning/card"), indent=1))' "$w/zoo-truth.json"
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
cp "$w/zoo-truth.json" "$out/zoo-truth.json"
tar czf "$out/all.tgz" -C "$w" .
