#!/usr/bin/env bash
# The SimCLR ResNet-50 workload (examples/simclr_resnet50) searched on one GPU under
# --memory-limit LIMIT (24GiB) in each mode, README.md's table:
#   default     the defaults: the whole process held to the limit, trials forked from the preloading server
#   allocator   --memory-limit-scope allocator: only torch's allocator capped (as PYTORCH_CUDA_ALLOC_CONF's
#               per_process_memory_fraction does); the modes below cap the allocator too
#   no-preload  every trial a fresh process
#   worker      a warm worker with verified resets (examples/worker/simclr_trial.py), confirmed in fresh trials
#   bisect      bracket and bisection, every trial a fresh process
# Prints a table (mode, answer, trials, forked trials, seconds), the time ratios of the modes against
# --no-preload, and every trial (size, outcome, seconds, phase, forked, peaks allocated, reserved and NVML
# in GiB). Writes each mode's JSON, stderr and logs under OUTDIR. Measured: bench/results/simclr-24gib-h200.txt.
# Usage: bench/gpu_simclr.sh [BATCHFIT] [OUTDIR] [MODES...]
#        (default: batchfit on PATH, ./bench-out, all five modes)
set -euo pipefail
bf=${1:-batchfit}
out=${2:-bench-out}
shift $(($# < 2 ? $# : 2))
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(default allocator no-preload worker bisect)
limit=${LIMIT:-24GiB}
mkdir -p "$out"
py=$(command -v python3)
prog=("$py" examples/simclr_resnet50/train.py --batch-size {})
# Warm the file cache once, so that no mode pays the first import alone.
"$py" -c 'import torch, torchvision; torch.zeros(1).cuda()'
for m in "${modes[@]}"; do
	alloc=(--memory-limit-scope allocator)
	case $m in
	default) flags=() cmd=("${prog[@]}") ;;
	allocator) flags=("${alloc[@]}") cmd=("${prog[@]}") ;;
	no-preload) flags=("${alloc[@]}" --no-preload) cmd=("${prog[@]}") ;;
	worker) flags=("${alloc[@]}" --worker) cmd=("$py" -m batchfit.worker examples/worker/simclr_trial.py:Trial) ;;
	bisect) flags=("${alloc[@]}" --strategy bisect --no-preload) cmd=("${prog[@]}") ;;
	*) echo "gpu_simclr: unknown mode $m (default, allocator, no-preload, worker, bisect)" >&2; exit 2 ;;
	esac
	"$bf" search --no-db --memory-limit "$limit" --steps 2 --json --log-dir "$out/logs-$m" "${flags[@]}" -- "${cmd[@]}" \
		>"$out/$m.json" 2>"$out/$m.err" || echo "gpu_simclr: mode $m exited $?" >&2
done
python3 - "$out" "${modes[@]}" <<'PY'
import json, sys
out, modes = sys.argv[1], sys.argv[2:]
runs = {}
for m in modes:
    try:
        runs[m] = json.load(open(f"{out}/{m}.json"))["runs"][0]  # docs/json.md
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"{m}: no record ({e})")
print(f"{'mode':10} {'answer':>6} {'trials':>6} {'forked':>6} {'seconds':>8}")
for m, r in runs.items():
    forked = sum(1 for t in r["trials"] if t.get("forked"))
    print(f"{m:10} {r['answer'] or '-':>6} {len(r['trials']):>6} {forked:>6} {r['seconds']:>8.1f}")
base = runs.get("no-preload")
for m, r in runs.items():
    if base and m != "no-preload":
        print(f"time ratio {m}/no-preload: {r['seconds'] / base['seconds']:.2f}")
for m, r in runs.items():
    print(f"\n{m}: n size outcome seconds phase forked peak_alloc_GiB peak_reserved_GiB peak_nvml_GiB")
    for t in r["trials"]:
        g = lambda k: (t.get(k) or 0) / 2**30
        print(f"  {t['n']:2} {t['batch_size']:5} {t['outcome']:8} {t['seconds']:6.1f} {t['phase'] or '':8} "
              f"{'forked' if t.get('forked') else 'fresh':6} {g('peak_allocated_bytes'):7.2f} "
              f"{g('peak_reserved_bytes'):7.2f} {g('peak_device_bytes'):7.2f}")
PY
