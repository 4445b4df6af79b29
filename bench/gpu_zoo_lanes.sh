#!/usr/bin/env bash
# Runs bench/zoo.py in lanes, one per GPU, at once: each LANE is
# GPU:WORKLOADS:CONDITIONS:MODES (e.g. 0:simclr,lm:24GiB:fresh,preload), run
# one after another when several name the same GPU. Missing truths are
# computed (--truth). Each lane is cut at LANE_S seconds (540); every log
# stays in WORK, tarred into OUTDIR/all.tgz with every lane's table and
# the truths in summary.txt, whatever happened.
# Usage: bench/gpu_zoo_lanes.sh BATCHFIT OUTDIR LANE...
set -u
bf=$1
out=$2
shift 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/zoo-lanes}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
declare -A byGPU
i=0
for lane in "$@"; do
	IFS=: read -r gpu loads conds modes <<<"$lane"
	byGPU[$gpu]+="python3 bench/zoo.py --batchfit $bf --out $w/lane$i --gpu $gpu --truth --workloads $loads --conditions $conds --modes $modes >$w/lane$i.out 2>&1; "
	i=$((i + 1))
done
for gpu in "${!byGPU[@]}"; do
	timeout "${LANE_S:-540}" bash -c "${byGPU[$gpu]}" &
done
wait
cp bench/zoo-truth.json "$w/"
{
	for f in "$w"/lane*.out; do
		echo "== $f"
		cat "$f"
	done
	echo "== truths"
	cat bench/zoo-truth.json
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
