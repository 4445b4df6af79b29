#!/usr/bin/env bash
# Runs the question's SimCLR ResNet-50 workload on a GPU in each mode and
# prints a table: answer, trials, seconds, and the peak of every trial.
#   model   fresh processes, memory-model guided (the default)
#   bisect  fresh processes, bracket and bisection
#   worker  a warm worker with verified resets, settled in fresh processes
#   preload model, with trials forked from a server that imported torch and
#           torchvision (--preload; bench/gpu_preload.sh compares the peaks)
# Usage: bench/gpu_simclr.sh [BATCHFIT] [OUTDIR] [MODES...]
#        (default: batchfit on PATH, ./bench-out, all three modes)
set -euo pipefail
bf=${1:-batchfit}
out=${2:-bench-out}
shift 2 2>/dev/null || true
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(model bisect worker)
limit=${LIMIT:-24GiB}
mkdir -p "$out"
py=$(command -v python3)
# Warm the file cache once, so that no mode pays the first import alone.
"$py" -c 'import torch, torchvision; torch.zeros(1).cuda()'
for m in "${modes[@]}"; do
	case $m in
	model | bisect) cmd=(search --strategy "$m" -- "$py" examples/simclr_resnet50/train.py --batch-size {}) ;;
	preload) cmd=(search --preload -- "$py" examples/simclr_resnet50/train.py --batch-size {}) ;;
	worker) cmd=(search --worker -- "$py" -m batchfit.worker examples/worker/simclr_trial.py:Trial) ;;
	*) echo "unknown mode $m" >&2; exit 2 ;;
	esac
	"$bf" "${cmd[@]:0:1}" --no-db --memory-limit "$limit" --steps 2 --json --log-dir "$out/logs-$m" "${cmd[@]:1}" \
		>"$out/$m.json" 2>"$out/$m.err" || echo "mode $m exited $?" >&2
done
python3 - "$out" "${modes[@]}" <<'PY'
import json, sys
out, modes = sys.argv[1], sys.argv[2:]
runs = {m: json.load(open(f"{out}/{m}.json"))["runs"][0] for m in modes}  # docs/json.md
print(f"{'mode':8} {'answer':>6} {'trials':>6} {'seconds':>8}")
for m, r in runs.items():
    print(f"{m:8} {r['answer'] or '-':>6} {len(r['trials']):>6} {r['seconds']:>8.1f}")
for a, b in (("model", "bisect"), ("worker", "model"), ("preload", "model")):
    if a in runs and b in runs:
        print(f"time ratio {a}/{b}: {runs[a]['seconds'] / runs[b]['seconds']:.2f}")
for m, r in runs.items():
    print(f"\n{m}: n size outcome seconds phase peak_alloc_GiB peak_reserved_GiB peak_nvml_GiB")
    for t in r["trials"]:
        g = lambda k: (t[k] or 0) / 2**30
        print(f"  {t['n']:2} {t['batch_size']:5} {t['outcome']:8} {t['seconds']:6.1f} {t['phase'] or '':8} {g('peak_allocated_bytes'):7.2f} {g('peak_reserved_bytes'):7.2f} {g('peak_device_bytes'):7.2f}")
PY
