#!/usr/bin/env bash
# Programs whose batch shapes vary, each searched with batchfit's defaults
# (3 steps a trial, the loader's largest batches first) under
# --memory-limit CARD, and the answer then checked by running the whole
# program plainly at the answer and the size above on a real card
# (bench/card_check.py: another process holds all but CARD of the GPU).
# Prints one row per workload: answer, trials, seconds, the batches' shapes
# as the summary gives them, verdict.
#
#   bench/gpu_shapes.sh [BATCHFIT] [OUTDIR] [WORKLOADS...]
#   CARD=24GiB (default); FLAGS: more search flags (--worst-case off, say);
#   WORKLOADS: varlen objects hf (default: all):
#     varlen   bench/workloads/varlen_lm.py: a plain loop, its longest batch
#              at step 5 of 6
#     objects  bench/workloads/objects.py: 4 to 300 objects an image
#     hf       bench/workloads/hf_padding.py: the HF Trainer with
#              DataCollatorWithPadding, texts of 32 to 1024 words
set -u
bf=${1:-batchfit}
out=${2:-/tmp/shapes}
shift 2 2>/dev/null
card=${CARD:-24GiB}
read -ra flags <<<"${FLAGS:-}"
mkdir -p "$out"
workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(varlen objects hf)

command_of() {
  case $1 in
  varlen) echo python3 bench/workloads/varlen_lm.py --batch-size {} ;;
  objects) echo python3 bench/workloads/objects.py --batch-size {} ;;
  hf) echo python3 bench/workloads/hf_padding.py --output_dir /tmp/shapes-hf --per_device_train_batch_size {} \
    --bf16 --report_to none --save_strategy no --disable_tqdm true ;;
  *) return 1 ;;
  esac
}

printf '%-8s %7s %6s %8s  %-40s %s\n' workload answer trials seconds shapes "whole program, real $card card"
for w in "${workloads[@]}"; do
  read -ra cmd <<<"$(command_of "$w")" || { echo "unknown workload $w" >&2; exit 2; }
  "$bf" search --no-db --memory-limit "$card" "${flags[@]}" --json --log-dir "$out/logs-$w" -- "${cmd[@]}" >"$out/$w.json" 2>"$out/$w.err"
  read -r ans trials secs shapes < <(python3 -c "
import json; r = json.load(open('$out/$w.json'))['runs'][0]
s = r.get('input_shapes') or {}
ranges = '; '.join(' '.join(g['tensors'][:2]) + ' ' + 'x'.join(map(str, g['smallest'])) + '..' + 'x'.join(map(str, g['largest'])) for g in s.get('ranges') or [])[:60]
how = 'worst first' if s.get('worst_first') else (s.get('why_not') or 'fixed')
print(r['answer'] or '-', len(r['trials']), round(r['seconds']), (how + ': ' + ranges) if ranges else how)")
  verdict=-
  if [ "$ans" != - ]; then
    python3 bench/card_check.py --card "$card" --answer "$ans" -- "${cmd[@]}" >"$out/$w.check" 2>&1
    verdict=$(sed -n 's/^verdict: //p' "$out/$w.check")
  fi
  rm -rf "$out/logs-$w"
  printf '%-8s %7s %6s %8s  %-40s %s\n' "$w" "$ans" "$trials" "$secs" "$shapes" "$verdict"
done
