#!/usr/bin/env bash
# Session 15's pinning check on two H200s (nvidia-h200-x2), cut to what the session's device time left:
#   1. the HF Trainer at 24 GiB with no --gpus: trials are now pinned to GPU 0 on a machine of several (session
#      14's unpinned run saw both GPUs and DataParallel answered 44; the truth is 71)
#   2. --worker --gpus 1 on SimCLR at 24 GiB: the warm worker and its fresh confirmations pinned to GPU 1
# nvidia-smi is sampled every 0.5 s to show which GPU held the processes.
# Usage: bench/gpu_session15d.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s15d}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
nvidia-smi -L >"$w/gpus.txt" 2>&1
monitor() { # samples which GPU (by UUID) each compute process is on, into $1, until killed
	while :; do
		nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,used_memory --format=csv,noheader >>"$1" 2>&1
		sleep 0.5
	done
}
monitor "$w/hf-smi.txt" &
mon=$!
timeout 110 python3 bench/zoo.py --batchfit "$bf" --out "$w/hf" --conditions 24GiB --workloads hf --modes preload \
	>"$w/hf.out" 2>&1
echo "hf: exit $?" >>"$w/hf.out"
kill $mon
monitor "$w/worker-smi.txt" &
mon=$!
timeout 60 "$bf" search --no-db --json --memory-limit 24GiB --memory-limit-scope allocator --steps 2 --worker --gpus 1 \
	--log-dir "$w/logs-worker" -- python3 -m batchfit.worker examples/worker/simclr_trial.py:Trial \
	>"$w/worker.json" 2>"$w/worker.err"
echo "worker --gpus 1: exit $? $(python3 bench/record_line.py "$w/worker.json")" >"$w/worker.txt"
kill $mon
{
	cat "$w/gpus.txt"
	for f in "$w"/hf/*-24GiB-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/hf.out" "$w/worker.txt"
	echo "--- GPUs the HF processes were seen on (samples, uuid)"
	cut -d, -f2 "$w/hf-smi.txt" | sort | uniq -c
	echo "--- GPUs the worker search's processes were seen on"
	cut -d, -f2 "$w/worker-smi.txt" | sort | uniq -c
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
