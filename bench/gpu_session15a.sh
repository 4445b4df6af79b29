#!/usr/bin/env bash
# Session 15's GPU call, two H200s (nvidia-h200-x2): what session 14 built and could not run on a GPU.
#   1. the HF Trainer at 24 GiB, one GPU without --gpus (trials are now pinned to GPU 0 on a machine of
#      several: session 14's unpinned run saw both and DataParallel answered 44), then two GPUs (--gpus 0,1:
#      session 14 answered 60 with 67 seen running twice, now the search goes on above a conflict that held)
#   2. --worker --gpus 1 (the warm worker and its fresh confirmations now pinned to the search's GPU), with
#      nvidia-smi sampled every 0.5 s to show which GPU held the processes
#   3. Lightning and SimCLR at 24 GiB, one GPU against two (issue 12's two-GPU target; Lightning not run on two
#      GPUs since session 11)
# Usage: bench/gpu_session15a.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s15a}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
nvidia-smi -L >"$w/gpus.txt" 2>&1
gpu_idle() { # waits up to 60 s until no process holds GPU memory
	for _ in $(seq 1 120); do
		[ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && return
		sleep 0.5
	done
	echo "gpu still busy: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader)" >>"$w/idle.txt"
}
monitor() { # samples which GPU (by UUID) each compute process is on, into $1, until killed
	while :; do
		nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,used_memory --format=csv,noheader >>"$1" 2>&1
		sleep 0.5
	done
}
monitor "$w/hf-smi.txt" &
mon=$!
timeout "${HF_S:-200}" python3 bench/zoo.py --batchfit "$bf" --out "$w/hf" --conditions 24GiB \
	--workloads hf --modes preload,gpus2 >"$w/hf.out" 2>&1
echo "hf: exit $?" >>"$w/hf.out"
kill $mon
gpu_idle
monitor "$w/worker-smi.txt" &
mon=$!
timeout 120 "$bf" search --no-db --json --memory-limit 24GiB --memory-limit-scope allocator --steps 2 --worker --gpus 1 \
	--log-dir "$w/logs-worker" -- python3 -m batchfit.worker examples/worker/simclr_trial.py:Trial \
	>"$w/worker.json" 2>"$w/worker.err"
echo "worker --gpus 1: exit $? $(python3 bench/record_line.py "$w/worker.json")" >"$w/worker.txt"
kill $mon
gpu_idle
timeout "${ZOO_S:-260}" python3 bench/zoo.py --batchfit "$bf" --out "$w/zoo" --conditions 24GiB \
	--workloads "${ZOO_WORKLOADS:-simclr,lightning}" --modes preload,gpus2 >"$w/zoo.out" 2>&1
echo "zoo: exit $?" >>"$w/zoo.out"
{
	cat "$w/gpus.txt"
	for f in "$w"/hf/*-24GiB-*.json "$w"/zoo/*-24GiB-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/hf.out" "$w/worker.txt" "$w/zoo.out"
	echo "--- GPUs the HF processes were seen on (uuid: samples)"
	cut -d, -f2 "$w/hf-smi.txt" | sort | uniq -c
	echo "--- GPUs the worker search's processes were seen on"
	cut -d, -f2 "$w/worker-smi.txt" | sort | uniq -c
	cat "$w/idle.txt" 2>/dev/null
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
