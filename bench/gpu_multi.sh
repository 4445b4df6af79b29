#!/usr/bin/env bash
# On a machine with two GPUs: the SimCLR example (examples/simclr_resnet50) under
# --memory-limit LIMIT (24GiB; SCOPE, allocator, is --memory-limit-scope) on one
# GPU, on --gpus 0,1 (a size a GPU each round), and as a torchrun trial spanning
# both GPUs (the per-GPU batch size). Prints a table (run, answer, trials, rounds,
# seconds), the time ratio of two GPUs to one, and every trial (size, outcome,
# seconds, GPUs, peaks allocated and NVML in GiB). Writes each run's JSON, stderr
# and logs under OUTDIR. Measured: bench/results/simclr-24gib-h200.txt.
# Usage: bench/gpu_multi.sh [BATCHFIT] [OUTDIR]
set -euo pipefail
bf=${1:-batchfit}
out=${2:-bench-out}
limit=${LIMIT:-24GiB}
mkdir -p "$out"
py=$(command -v python3)
"$py" -c 'import torch, torchvision; torch.zeros(1).cuda()'
common=(--no-db --memory-limit "$limit" --memory-limit-scope "${SCOPE:-allocator}" --steps 2 --json)
"$bf" search "${common[@]}" --log-dir "$out/logs-one" -- "$py" examples/simclr_resnet50/train.py --batch-size {} >"$out/one.json" 2>"$out/one.err" || true
"$bf" search "${common[@]}" --log-dir "$out/logs-two" --gpus 0,1 -- "$py" examples/simclr_resnet50/train.py --batch-size {} >"$out/two.json" 2>"$out/two.err" || true
torchrun=$(dirname "$py")/torchrun
"$bf" search "${common[@]}" --log-dir "$out/logs-ddp" --gpus 0,1 --gpus-per-trial 2 -- "$torchrun" --nproc_per_node=2 examples/simclr_resnet50/train.py --batch-size {} >"$out/ddp.json" 2>"$out/ddp.err" || true
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print(f"{'run':28} {'answer':>6} {'trials':>6} {'rounds':>6} {'seconds':>8}")
runs = {}
for name, label in (("one", "1 GPU"), ("two", "--gpus 0,1"), ("ddp", "torchrun x2 (per-GPU size)")):
    try:
        r = json.load(open(f"{out}/{name}.json"))["runs"][0]  # docs/json.md
    except Exception as e:
        print(f"{label:28} failed: {e}")
        continue
    runs[name] = r
    print(f"{label:28} {r['answer'] or '-':>6} {len(r['trials']):>6} {r['rounds']:>6} {r['seconds']:>8.1f}")
if "one" in runs and "two" in runs:
    print(f"time ratio two/one: {runs['two']['seconds'] / runs['one']['seconds']:.2f}")
for name, r in runs.items():
    print(f"\n{name}: n size outcome seconds gpus peak_alloc_GiB peak_nvml_GiB")
    for t in r["trials"]:
        print(f"  {t['n']:2} {t['batch_size']:5} {t['outcome']:8} {t['seconds']:6.1f} {t.get('gpus')} {t.get('peak_allocated_bytes',0)/2**30:7.2f} {t.get('peak_device_bytes',0)/2**30:7.2f}")
PY
