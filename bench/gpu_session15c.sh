#!/usr/bin/env bash
# Session 15's last call on one H200: the JAX example at 24 GiB once more (JAX_S, 420 s), with the failures'
# own requests placing the safe side (internal/search/risk.go as committed after calls 2 and 3), then SimCLR at
# 24 GiB (preload) as a check that the bracket's new rules leave a monotone PyTorch search as it was (282).
# Usage: bench/gpu_session15c.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s15e}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
timeout "${JAX_S:-420}" python3 bench/zoo.py --batchfit "$bf" --out "$w/jax" --conditions 24GiB \
	--workloads jax --modes preload >"$w/jax.out" 2>&1
echo "jax: exit $?" >>"$w/jax.out"
timeout 120 python3 bench/zoo.py --batchfit "$bf" --out "$w/simclr" --conditions 24GiB \
	--workloads simclr --modes preload >"$w/simclr.out" 2>&1
echo "simclr: exit $?" >>"$w/simclr.out"
{
	for f in "$w"/jax/*-24GiB-*.json "$w"/simclr/*-24GiB-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/jax.out" "$w/simclr.out"
	python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; print('warnings:', r['warnings']); print('at_risk:', r['at_risk'])" "$w"/jax/jax-24GiB-preload.json
	ls -l --time-style=+%T "$w"/jax/logs-*/trial-*.err 2>/dev/null | awk '{print $6, $7}'
	for f in "$w"/jax/logs-*/trial-*.err; do
		echo "$(basename "$f"): $(grep -o "only reduced to [0-9.]*GiB" "$f" | head -1) $(grep -o 'trying to allocate [0-9.]*GiB' "$f" | head -1)"
	done
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
