#!/usr/bin/env bash
# Session 14's fifth GPU call, two H200s (nvidia-h200-x2, lent for the first time since session 11):
# issue 12's two-GPU target, one GPU against two (--gpus 0,1) over the zoo at 24 GiB, preload both,
# each workload's pair back to back (bench/zoo.py --modes preload,gpus2), cut at ZOO_S.
# Usage: bench/gpu_session14e.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s14e}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
nvidia-smi -L >"$w/gpus.txt" 2>&1
timeout "${ZOO_S:-300}" python3 bench/zoo.py --batchfit "$bf" --out "$w/zoo" --conditions 24GiB \
	--workloads "${ZOO_WORKLOADS:-simclr,lm,hf}" --modes preload,gpus2 >"$w/zoo.out" 2>&1
echo "zoo: exit $?" >>"$w/zoo.out"
{
	cat "$w/gpus.txt"
	for f in "$w/zoo"/*-24GiB-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/zoo.out"
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
