#!/usr/bin/env bash
# Session 12's third GPU call, one H200:
#   1. the LM on the whole card: its truth (160, session 11) against batchfit's 152 (call 2): a plain
#      fresh run at 160 and 153, and batchfit's hooked fresh trial at 153 (--no-preload)
#   2. Lightning at 24 GiB near its boundary: the proof's re-checks side by side, with the CPU
#      threads now shared (they took 58 s against 5.5 s alone in call 1)
#   3. the HF truth on the whole card, finished: 425 plain (call 2's bisection was cut with 424 ok,
#      426 out of memory)
#   4. the zoo on the whole card, preloading: hf, simclr, jax, cut at CARD_S (330 s)
# Logs in WORK, tarred into OUTDIR/all.tgz with summary.txt.
# Usage: bench/gpu_session12c.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s12c}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
lm=(python3 examples/transformer_lm/train.py --steps 2 --batch-size)
{
	for s in 160 153; do
		timeout 60 "${lm[@]}" $s >"$w/lm-plain-$s.out" 2>&1
		echo "lm plain $s: exit $? $(grep -o 'OutOfMemoryError.\{0,60\}' "$w/lm-plain-$s.out" | head -1)"
	done
	timeout 60 "$bf" search --no-db --json --no-preload --min 153 --max 153 --steps 2 --log-dir "$w/logs-lm-hooked" \
		-- python3 examples/transformer_lm/train.py --batch-size {} >"$w/lm-hooked.json" 2>"$w/lm-hooked.err"
	echo "lm hooked fresh 153: exit $? $(python3 bench/record_line.py "$w/lm-hooked.json")"
	timeout 120 "$bf" search --no-db --json --memory-limit 24GiB --memory-limit-scope allocator --min 1998 --max 2008 \
		--steps 3 --log-dir "$w/logs-lightning" -- python3 examples/lightning_resnet/train.py fit --data.batch_size {} \
		--trainer.precision 16-mixed --trainer.logger false --trainer.enable_checkpointing false \
		--trainer.enable_progress_bar false --trainer.enable_model_summary false >"$w/lightning.json" 2>"$w/lightning.err"
	echo "lightning 24GiB near the boundary: exit $? $(python3 bench/record_line.py "$w/lightning.json")"
	python3 /dev/stdin "$w/lightning.json" <<'PY'
import json, sys
for t in json.load(open(sys.argv[1]))["runs"][0]["trials"]:
    print(f"  trial {t['n']} {t['batch_size']} {t['outcome']} {t['seconds']:.1f}s forked={t['forked']} shared={t['shared_gpu']} step_s={t['step_seconds']}")
PY
	timeout 60 python3 bench/fresh_bisect.py --json "$w/hf-425.json" --start 425 --min 425 --max 425 -- python3 \
		examples/hf_trainer/train.py --output_dir /tmp/zoo-hf --per_device_train_batch_size {} --bf16 --report_to none \
		--save_strategy no --disable_tqdm true --max_steps 3 >"$w/hf-425.out" 2>&1
	echo "hf plain 425 (card): exit $? $(tail -2 "$w/hf-425.out" | tr '\n' ' ')"
} >"$w/checks.txt" 2>&1
timeout "${CARD_S:-330}" python3 bench/zoo.py --batchfit "$bf" --out "$w/card" --conditions card \
	--workloads "${CARD_WORKLOADS:-hf,simclr,jax}" --modes preload >"$w/card.out" 2>&1
{
	cat "$w/checks.txt"
	echo "== card"
	for f in "$w/card"/*-card-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/card.out"
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
