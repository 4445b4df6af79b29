#!/usr/bin/env bash
# Session 13's third GPU call, one H200: the zoo's workloads not yet measured with this session's binary.
#   1. the zoo at 24 GiB (preload): lightning, cut at LIGHTNING_S (170 s)
#   2. the zoo at 24 GiB (preload): jax, cut at JAX_S (215 s)
#   3. the zoo on the whole card (preload): jax, cut at CARD_S (195 s)
# A stage cut by its timeout ends zoo.py at once, while batchfit stops its trials; the next stage waits until
# no process holds the GPU (call 2's JAX card run found the cut trial still exiting and was refused: the GPU
# was busy).
# Logs in WORK, tarred into OUTDIR/all.tgz with summary.txt.
# Usage: bench/gpu_session13c.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s13c}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
gpu_idle() { # waits up to 60 s until no process holds GPU memory
	for _ in $(seq 1 120); do
		[ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && return
		sleep 0.5
	done
	echo "gpu still busy: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader)" >>"$w/idle.txt"
}
stage() { # NAME SECONDS CONDITION WORKLOAD
	timeout "$2" python3 bench/zoo.py --batchfit "$bf" --out "$w/$1" --conditions "$3" --workloads "$4" \
		--modes preload >"$w/$1.out" 2>&1
	echo "$1: exit $?" >>"$w/idle.txt"
	gpu_idle
}
stage lightning "${LIGHTNING_S:-170}" 24GiB lightning
stage jax "${JAX_S:-215}" 24GiB jax
stage jaxcard "${CARD_S:-195}" card jax
{
	cat "$w/idle.txt"
	for d in lightning jax jaxcard; do
		echo "== $d"
		for f in "$w/$d"/*.json; do
			case $f in */zoo.json) continue ;; esac
			[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
		done
		cat "$w/$d.out"
	done
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
