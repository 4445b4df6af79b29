#!/usr/bin/env bash
# Session 16's JAX calls on one H200: the JAX example at 24 GiB (preload), with the pool-failure risk rule of
# internal/search/risk.go as of the binary's commit (calls 2 and 5 of bench/results/2026-12-01-session16-h200.txt).
# COND=card runs the whole card instead (bench/gpu_session16c.sh).
# Usage: bench/gpu_session16b.sh BATCHFIT OUTDIR
set -u
cond=${COND:-24GiB}
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s16b}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
timeout "${JAX_S:-430}" python3 bench/zoo.py --batchfit "$bf" --out "$w/jax" --conditions "$cond" \
	--workloads jax --modes preload >"$w/jax.out" 2>&1
echo "jax: exit $?" >>"$w/jax.out"
{
	for f in "$w"/jax/*-"$cond"-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/jax.out"
	python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; print('warnings:', r['warnings']); print('at_risk:', r['at_risk'])" "$w"/jax/jax-"$cond"-preload.json
	for f in "$w"/jax/logs-*/trial-*.err; do
		echo "$(basename "$f"): $(grep -o "only reduced to [0-9.]*GiB" "$f" | head -1) $(grep -o 'trying to allocate [0-9.]*GiB' "$f" | head -1)"
	done
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
