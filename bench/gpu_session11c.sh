#!/usr/bin/env bash
# Session 11's third GPU call, on two GPUs, after the planner's safeguards,
# the per-trial allocator cap and the worker's primed fork server:
#   lane 0  SimCLR at 24 GiB: default (whole process), allocator scope with
#           and without preloading, worker mode; the zoo's lm and jax
#           (preload)
#   lane 1  the zoo's hf and lightning (preload)
#   then    the zoo's simclr, lm, hf on both GPUs (--gpus 0,1)
# Lanes are cut at LANE_S seconds (330), the two-GPU part at GPUS2_S (170).
# On a machine of one GPU: lane 0 without JAX, then lane 1, cut at ONE_S (520);
# logs in WORK, tarred into OUTDIR/all.tgz with summary.txt.
# Usage: bench/gpu_session11c.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s11c}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
simclr() { # NAME FLAGS...: a SimCLR search at 24 GiB on GPU 0
	local name=$1
	shift
	"$bf" search --no-db --json --gpus 0 --memory-limit 24GiB --steps 2 --log-dir "$w/logs-$name" "$@" \
		>"$w/$name.json" 2>"$w/$name.err"
	echo "$name: exit $? $(python3 bench/record_line.py "$w/$name.json")" >>"$w/simclr.txt"
}
zoo() { python3 bench/zoo.py --batchfit "$bf" --conditions 24GiB "$@"; }
lane0() {
	simclr process -- python3 examples/simclr_resnet50/train.py --batch-size {}
	simclr alloc --memory-limit-scope allocator -- python3 examples/simclr_resnet50/train.py --batch-size {}
	simclr alloc-nopreload --memory-limit-scope allocator --no-preload -- python3 examples/simclr_resnet50/train.py --batch-size {}
	simclr worker --memory-limit-scope allocator --worker -- python3 -m batchfit.worker examples/worker/simclr_trial.py:Trial
	zoo --out "$w/l0" --gpu 0 --workloads lm${LANE0_MORE-,jax} --modes preload >"$w/l0.out" 2>&1
}
lane1() {
	zoo --out "$w/l1" --gpu "$1" --workloads hf,lightning --modes preload >"$w/l1.out" 2>&1
}
export -f simclr zoo lane0 lane1
export bf w
if [ "$(nvidia-smi -L | grep -c '^GPU ')" -ge 2 ]; then
	timeout "${LANE_S:-330}" bash -c lane0 &
	timeout "${LANE_S:-330}" bash -c 'lane1 1' &
	wait
	timeout "${GPUS2_S:-170}" bash -c 'zoo --out "$w/g2" --workloads simclr,lm,hf --modes gpus2 >"$w/g2.out" 2>&1'
else
	# One GPU: the lanes one after the other, without JAX; no two-GPU part.
	export LANE0_MORE=""
	timeout "${ONE_S:-520}" bash -c 'lane0; lane1 0'
fi
{
	echo "== simclr"
	cat "$w/simclr.txt"
	for d in l0 l1 g2; do
		echo "== $d"
		for f in "$w/$d"/*-24GiB-*.json; do
			[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
		done
		cat "$w/$d.out" 2>/dev/null
	done
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
