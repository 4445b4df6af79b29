#!/usr/bin/env bash
# Issue 13's GPU checks, on one GPU, with a 24 GiB cap (LIMIT):
#   lightning        batchfit search on examples/lightning_resnet, unmodified
#                    (LightningCLI, --data.batch_size {})
#   lightning-quick  the same search over sizes 8 to 16 only (a record for
#                    lightning-apply in a minute)
#   lightning-truth  independent fresh-process bisection of the same
#                    (bench/fresh_bisect.py, no batchfit)
#   lightning-apply  training with batchfit.lightning.BatchSizeFromBatchfit
#                    reading the search's JSON; then the same with another
#                    --trainer.precision, which must be refused
#   fraction         the Lightning script at the answer and answer+1 under
#                    PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction and
#                    under torch.cuda.set_per_process_memory_fraction (the
#                    same fraction), bare, with the allocator's figures
#                    (FRACTION_SIZES: other sizes)
#   hf               batchfit search on examples/hf_trainer (unmodified)
#   hf-truth         independent fresh-process bisection of the same
#   hf-apply         training with batchfit.hf.BatchSizeFromBatchfit
# The searches cap only the allocator (--memory-limit-scope allocator), as
# the bisection does with PYTORCH_CUDA_ALLOC_CONF, so that the two compare.
# Writes summary.txt and all.tgz under OUTDIR.
# Usage: bench/gpu_issue13.sh [BATCHFIT] [OUTDIR] [PARTS...]
# Environment: LIMIT (24GiB), BF_ARGS (more flags for every search).
set -u
bf=${1:-batchfit}
out=${2:-bench-out}
shift $(($# < 2 ? $# : 2))
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(lightning lightning-truth lightning-apply fraction hf hf-truth hf-apply)
limit=${LIMIT:-24GiB}
read -r -a bf_args <<<"${BF_ARGS:-}"
py=$(command -v python3)
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-$(mktemp -d)} # WORK: keep every log there, also when a caller's timeout cuts this short
mkdir -p "$w"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
T0=$SECONDS
log() { echo "[$((SECONDS - T0))s] $*" | tee -a "$w/summary.txt"; }
total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | head -1)
limit_bytes=$("$py" -c "import sys; s=sys.argv[1]; print(int(float(s[:-3]) * 2**30))" "$limit")
fraction=$("$py" -c "print($limit_bytes / ($total * 2**20))")
light=(examples/lightning_resnet/train.py fit --trainer.precision 16-mixed --trainer.logger false
	--trainer.enable_checkpointing false --trainer.enable_progress_bar false --trainer.enable_model_summary false)
hf=(examples/hf_trainer/train.py --output_dir "$w/hf-out" --bf16 --report_to none --save_strategy no
	--disable_tqdm true)
answer() { "$py" -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['runs'][0] if 'runs' in d else d; print(r.get('answer') or 0)" "$1" 2>/dev/null || echo 0; }
summarize() { # FILE.json LABEL: one line for a batchfit record
	"$py" - "$1" "$2" <<'PY' | tee -a "$w/summary.txt"
import json, sys
d = json.load(open(sys.argv[1])); r = d["runs"][0] if "runs" in d else d
ts = r.get("trials") or []
print(f"{sys.argv[2]}: status {r.get('status')} answer {r.get('answer')} first_failure {r.get('first_failure')} "
      f"trials {len(ts)} seconds {r.get('seconds', 0):.1f}")
for t in ts:
    print(f"    {t['n']:3} {t['batch_size']:6} {t['outcome']:10} {t['seconds']:6.1f}s {t.get('reason', '')[:90]}")
PY
}
truth() { # NAME START ARGS...: fresh-process bisection under the cap
	local name=$1 start=$2
	shift 2
	timeout 420 "$py" bench/fresh_bisect.py --json "$w/$name-truth.json" --log-dir "$w/logs-$name-truth" --start "$start" \
		--env "PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:$fraction" -- "$py" "$@" >"$w/$name-truth.out" 2>&1
	log "$name truth: exit $? $(tail -1 "$w/$name-truth.out")"
}

for part in "${parts[@]}"; do
	case $part in
	lightning)
		"$bf" search --no-db --json --memory-limit "$limit" --memory-limit-scope allocator --steps 3 "${bf_args[@]}" --log-dir "$w/logs-lightning" \
			-- "$py" "${light[@]}" --data.batch_size {} >"$w/lightning.json" 2>"$w/lightning.err"
		log "lightning search: exit $?"
		summarize "$w/lightning.json" lightning
		;;
	lightning-quick)
		# A search of sizes 8 to 16 only: a record for lightning-apply in a minute.
		"$bf" search --no-db --json --memory-limit "$limit" --memory-limit-scope allocator --steps 3 --min 8 --max 16 "${bf_args[@]}" \
			--log-dir "$w/logs-lightning" -- "$py" "${light[@]}" --data.batch_size {} >"$w/lightning.json" 2>"$w/lightning.err"
		log "lightning quick search (8 to 16): exit $?"
		summarize "$w/lightning.json" lightning
		;;
	lightning-truth) truth lightning 1024 "${light[@]}" --data.batch_size {} --trainer.max_steps 3 ;;
	lightning-apply)
		n=$(answer "$w/lightning.json")
		"$py" "${light[@]}" --data.batch_size 8 --trainer.max_steps 2 \
			--trainer.callbacks+=batchfit.lightning.BatchSizeFromBatchfit --trainer.callbacks.init_args.result "$w/lightning.json" \
			>"$w/lightning-apply.out" 2>&1
		log "lightning apply (answer $n): exit $?: $(grep -ao 'batchfit: batch_size.*' "$w/lightning-apply.out" | head -1)"
		grep -a 'batchfit:' "$w/lightning-apply.out" | head -5 >>"$w/summary.txt"
		"$py" "${light[@]/16-mixed/32-true}" --data.batch_size 8 --trainer.max_steps 2 \
			--trainer.callbacks+=batchfit.lightning.BatchSizeFromBatchfit --trainer.callbacks.init_args.result "$w/lightning.json" \
			>"$w/lightning-refuse.out" 2>&1
		log "lightning apply with --trainer.precision 32-true: exit $? (want ≠ 0): $(grep -ao 'ResultMismatch.*' "$w/lightning-refuse.out" | head -1 | cut -c1-300)"
		;;
	fraction)
		n=$(answer "$w/lightning.json")
		[ "$n" -gt 0 ] || n=${FRACTION_AT:-2000}
		for size in ${FRACTION_SIZES:-$((n - 1)) $n $((n + 1))}; do
			for mode in env api; do
				envs=()
				[ $mode = env ] && envs=(PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:$fraction)
				env "${envs[@]}" "$py" bench/fraction_probe.py $mode "$fraction" "${light[@]}" --data.batch_size $size --trainer.max_steps 3 \
					>"$w/fraction-$mode-$size.out" 2>&1
				log "fraction $mode at $size: exit $? $(grep -ao 'fraction_probe: .*' "$w/fraction-$mode-$size.out" | tail -1)"
			done
		done
		;;
	hf)
		"$bf" search --no-db --json --memory-limit "$limit" --memory-limit-scope allocator --steps 3 "${bf_args[@]}" --log-dir "$w/logs-hf" \
			-- "$py" "${hf[@]}" --per_device_train_batch_size {} >"$w/hf.json" 2>"$w/hf.err"
		log "hf search: exit $?"
		summarize "$w/hf.json" hf
		;;
	hf-truth) truth hf 64 "${hf[@]}" --per_device_train_batch_size {} --max_steps 3 ;;
	hf-apply)
		n=$(answer "$w/hf.json")
		"$py" "${hf[@]}" --per_device_train_batch_size 8 --max_steps 2 --batchfit_result "$w/hf.json" >"$w/hf-apply.out" 2>&1
		log "hf apply (answer $n): exit $?: $(grep -a 'batchfit:' "$w/hf-apply.out" | head -3 | tr '\n' ' ')"
		;;
	*) echo "gpu_issue13: unknown part $part" >&2 ;;
	esac
done
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
