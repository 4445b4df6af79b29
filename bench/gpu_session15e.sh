#!/usr/bin/env bash
# Session 15's last minutes on one H200 (the two-GPU kind was never lent): the binary with this session's search
# rules on the zoo's PyTorch programs at 24 GiB (LM and HF, preload; SimCLR ran in call 4), and --worker --gpus 0,
# the warm worker's pinning path (trivially one GPU here: the two-GPU check is bench/gpu_session15d.sh).
# Usage: bench/gpu_session15e.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s15f}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
timeout 45 "$bf" search --no-db --json --memory-limit 24GiB --memory-limit-scope allocator --steps 2 --worker --gpus 0 \
	--log-dir "$w/logs-worker" -- python3 -m batchfit.worker examples/worker/simclr_trial.py:Trial \
	>"$w/worker.json" 2>"$w/worker.err"
echo "worker --gpus 0: exit $? $(python3 bench/record_line.py "$w/worker.json")" >"$w/worker.txt"
timeout 120 python3 bench/zoo.py --batchfit "$bf" --out "$w/zoo" --conditions 24GiB --workloads lm,hf --modes preload \
	>"$w/zoo.out" 2>&1
echo "zoo: exit $?" >>"$w/zoo.out"
{
	cat "$w/worker.txt"
	for f in "$w"/zoo/*-24GiB-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/zoo.out"
	tail -n 5 "$w/worker.err"
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
