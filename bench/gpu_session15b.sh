#!/usr/bin/env bash
# Session 15's call on one H200: the JAX example at 24 GiB (preload), given the whole call (JAX_S, 560 s) for
# the first time: since session 12 every JAX search was cut at 195-230 s (trials of 15-25 s, XLA compiling and
# autotuning per size), so none has been seen to finish. The truth is 671, with a band 672-693 that XLA's own
# non-determinism makes both run and fail (bench/zoo-truth.json).
# Usage: bench/gpu_session15b.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s15b}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
timeout "${JAX_S:-560}" python3 bench/zoo.py --batchfit "$bf" --out "$w/jax" --conditions 24GiB \
	--workloads jax --modes preload >"$w/jax.out" 2>&1
echo "jax: exit $?" >>"$w/jax.out"
{
	for f in "$w"/jax/*-24GiB-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/jax.out"
	ls -l --time-style=+%T "$w"/jax/logs-*/trial-*.err 2>/dev/null | awk '{print $6, $7}'
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
