#!/usr/bin/env bash
# Session 16's third call on one H200: the JAX example on the whole card (preload, XLA's default pool of 75 %),
# never finished before (session 13 cut it at 195 s: 8 1078 2035 2248 2703 2979x 2971x 2837 2970...; the truth's
# bisection ran 3072), with the pool-failure risk rule of internal/search/risk.go.
# Usage: bench/gpu_session16c.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s16c}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
timeout "${JAX_S:-540}" python3 bench/zoo.py --batchfit "$bf" --out "$w/jax" --conditions card \
	--workloads jax --modes preload >"$w/jax.out" 2>&1
echo "jax: exit $?" >>"$w/jax.out"
{
	for f in "$w"/jax/*-card-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/jax.out"
	python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; print('warnings:', r['warnings']); print('at_risk:', r['at_risk'])" "$w"/jax/jax-card-preload.json
	for f in "$w"/jax/logs-*/trial-*.err; do
		echo "$(basename "$f"): $(grep -o "only reduced to [0-9.]*GiB" "$f" | head -1) $(grep -o 'trying to allocate [0-9.]*GiB' "$f" | head -1)"
	done
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
