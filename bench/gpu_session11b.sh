#!/usr/bin/env bash
# Session 11's second GPU call, on two GPUs: the zoo at 24 GiB.
#   lane 0  simclr, lm, jax: fresh and preload
#   lane 1  alloc_conf_lazy.py; SimCLR in worker mode (primed fork server);
#           hf fresh and preload; lightning preload (its trials stay fresh:
#           lightning is not preloadable)
# Each lane is cut at LANE_S seconds (545); logs in WORK, tarred into
# OUTDIR/all.tgz with summary.txt.
# Usage: bench/gpu_session11b.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s11b}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
zoo() { python3 bench/zoo.py --batchfit "$bf" --truth --conditions 24GiB "$@"; }
lane0() {
	zoo --out "$w/l0" --gpu 0 --workloads simclr,lm,jax --modes fresh,preload >"$w/l0.out" 2>&1
}
lane1() {
	CUDA_VISIBLE_DEVICES=1 PYTHONPATH=$PWD/python python3 bench/alloc_conf_lazy.py all >"$w/lazy.txt" 2>&1
	"$bf" search --no-db --json --gpus 1 --memory-limit 24GiB --memory-limit-scope allocator --steps 2 --worker \
		--log-dir "$w/logs-worker" -- python3 -m batchfit.worker examples/worker/simclr_trial.py:Trial \
		>"$w/worker.json" 2>"$w/worker.err"
	python3 bench/record_line.py "$w/worker.json" >"$w/worker.txt"
	zoo --out "$w/l1" --gpu 1 --workloads hf --modes fresh,preload >"$w/l1.out" 2>&1
	zoo --out "$w/l1b" --gpu 1 --workloads lightning --modes preload >"$w/l1b.out" 2>&1
}
export -f zoo lane0 lane1
export bf w
timeout "${LANE_S:-545}" bash -c lane0 &
timeout "${LANE_S:-545}" bash -c lane1 &
wait
cp bench/zoo-truth.json "$w/"
for f in lazy.txt worker.txt l0.out l1.out l1b.out; do
	echo "== $f"
	cat "$w/$f" 2>/dev/null
done >"$w/summary.txt"
for d in l0 l1 l1b; do
	[ -f "$w/$d/zoo.json" ] && { echo "== $d/zoo.json rows"; python3 -c "import json,sys; [print(r) for r in json.load(open(sys.argv[1]))]" "$w/$d/zoo.json"; }
done >>"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
