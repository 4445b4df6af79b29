#!/usr/bin/env bash
# Session 14's third GPU call, one H200:
#   1. Lightning's whole-card truth, finished: call 2's bisection ran 11664 and then stopped at 11672, whose
#      cublasCreate failed for want of memory (CUBLAS_STATUS_ALLOC_FAILED, which fresh_bisect.py now counts as
#      out of memory); the sizes between, bisected in fresh processes, and the truth written to zoo-truth.json
#   2. batchfit's search of Lightning on the whole card (preload), cut at LCARD_S (200 s)
#   3. SimCLR at 24 GiB (allocator scope) with --worker and its Trial module (call 2 gave it the script)
#   4. JAX at 24 GiB (preload), cut at JAX_S (230 s)
# Logs in WORK, tarred into OUTDIR/all.tgz with summary.txt; the truth file as left.
# Usage: bench/gpu_session14c.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s14c}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
gpu_idle() { # waits up to 60 s until no process holds GPU memory
	for _ in $(seq 1 120); do
		[ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && return
		sleep 0.5
	done
	echo "gpu still busy: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader)" >>"$w/idle.txt"
}
timeout 100 python3 bench/fresh_bisect.py --json "$w/lcard-rest.json" --log-dir "$w/lcard-rest" --min 11665 --max 11671 \
	--start 11668 --timeout 90 -- python3 examples/lightning_resnet/train.py fit --data.batch_size {} \
	--trainer.precision 16-mixed --trainer.logger false --trainer.enable_checkpointing false \
	--trainer.enable_progress_bar false --trainer.enable_model_summary false --trainer.max_steps 3 >"$w/lcard-rest.out" 2>&1
echo "rest: exit $?" >>"$w/lcard-rest.out"
python3 - "$w/lcard-rest.json" <<'PY' >>"$w/lcard-rest.out" 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("error"):
    sys.exit(f"no truth: {r['error'][:300]}")
answer = r["answer"] or 11664
t = json.load(open("bench/zoo-truth.json"))
t["lightning/card"] = {
    "answer": answer,
    "conditions": "fresh_bisect.py --start 1024, --trainer.max_steps 3, no limit: 14 trials to 11664 ok, 11672 out of "
                  "memory (CUBLAS_STATUS_ALLOC_FAILED in cublasCreate; session 14 call 2), then 11665-11671 bisected "
                  f"in call 3 ({len(r['trials'])} trials)",
    "measured": "2026-12-01",
    "source": "bench/results/2026-12-01-session14-h200.txt",
}
with open("bench/zoo-truth.json", "w") as f:
    json.dump(t, f, indent=2, sort_keys=True)
    f.write("\n")
print("lightning/card truth", answer)
PY
cp bench/zoo-truth.json "$w/zoo-truth.json"
gpu_idle
timeout "${LCARD_S:-200}" python3 bench/zoo.py --batchfit "$bf" --out "$w/lcard" --conditions card \
	--workloads lightning --modes preload >"$w/lcard.out" 2>&1
echo "lightning card: exit $?" >>"$w/lcard.out"
gpu_idle
"$bf" search --no-db --json --memory-limit 24GiB --memory-limit-scope allocator --steps 2 --worker \
	--log-dir "$w/logs-worker" -- python3 -m batchfit.worker examples/worker/simclr_trial.py:Trial \
	>"$w/worker.json" 2>"$w/worker.err"
echo "worker: exit $? $(python3 bench/record_line.py "$w/worker.json")" >"$w/worker.txt"
gpu_idle
timeout "${JAX_S:-230}" python3 bench/zoo.py --batchfit "$bf" --out "$w/jax" --conditions 24GiB \
	--workloads jax --modes preload >"$w/jax.out" 2>&1
echo "jax: exit $?" >>"$w/jax.out"
{
	cat "$w/idle.txt" 2>/dev/null
	echo "== lightning card, the rest of the truth"
	cat "$w/lcard-rest.out"
	echo "== lightning card, batchfit"
	for f in "$w/lcard"/*-card-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/lcard.out"
	echo "== worker"
	cat "$w/worker.txt"
	tail -4 "$w/worker.err"
	echo "== jax 24GiB"
	for f in "$w/jax"/*-24GiB-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/jax.out"
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
cp "$w/zoo-truth.json" "$out/zoo-truth.json"
tar czf "$out/all.tgz" -C "$w" .
