#!/usr/bin/env bash
# Session 13's third GPU call, one H200: Lightning at 24 GiB, and on the whole card (no limit), the last
# workload of the zoo without a whole-card truth.
#   0. the zoo at 24 GiB (preload): lightning, cut at ZOO_S (150 s)
#   1. batchfit (preload) on the whole card, through bench/zoo.py's command (3 steps), cut at BF_S (220 s)
#   2. its truth from fresh processes without batchfit (bench/fresh_bisect.py, --trainer.max_steps 3):
#      bisection within 64 sizes either side of batchfit's answer (or from 8192 up when batchfit gave none),
#      cut at TRUTH_S (180 s); the bisection runs its own sizes and stops where a size ran below one that did
#      not, as batchfit does
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
timeout "${ZOO_S:-150}" python3 bench/zoo.py --batchfit "$bf" --out "$w/zoo" --conditions 24GiB \
	--workloads lightning --modes preload >"$w/zoo.out" 2>&1
timeout "${BF_S:-220}" python3 bench/zoo.py --batchfit "$bf" --out "$w/card" --conditions card \
	--workloads lightning --modes preload >"$w/card.out" 2>&1
answer=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runs'][0]['answer'] or '')" \
	"$w/card/lightning-card-preload.json" 2>/dev/null)
if [ -n "$answer" ]; then
	range=(--start "$answer" --min $((answer - 64)) --max $((answer + 64)))
else
	range=(--start 8192)
fi
timeout "${TRUTH_S:-180}" python3 bench/fresh_bisect.py --json "$w/truth.json" --log-dir "$w/truth-logs" "${range[@]}" \
	-- python3 examples/lightning_resnet/train.py fit --data.batch_size {} --trainer.precision 16-mixed \
	--trainer.logger false --trainer.enable_checkpointing false --trainer.enable_progress_bar false \
	--trainer.enable_model_summary false --trainer.max_steps 3 >"$w/truth.out" 2>&1
echo "truth: exit $?" >>"$w/truth.out"
{
	echo "== zoo 24GiB"
	for f in "$w/zoo"/*-24GiB-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/zoo.out"
	echo "== batchfit, whole card"
	for f in "$w/card"/*-card-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/card.out"
	echo "== truth (${range[*]})"
	cat "$w/truth.out"
	cat "$w/truth.json" 2>/dev/null
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
