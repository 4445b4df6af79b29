#!/usr/bin/env bash
# Runs the question's SimCLR ResNet-50 workload with both strategies on a GPU
# and prints a table: answer, trials, seconds, and the peak of every trial.
# Usage: bench/gpu_simclr.sh [BATCHFIT] [OUTDIR]   (default: batchfit on PATH, ./bench-out)
set -euo pipefail
bf=${1:-batchfit}
out=${2:-bench-out}
limit=${LIMIT:-24GiB}
mkdir -p "$out"
py=$(command -v python3)
for s in model bisect; do
	"$bf" search --strategy "$s" --memory-limit "$limit" --steps 2 --json --log-dir "$out/logs-$s" \
		-- "$py" examples/simclr_resnet50/train.py --batch-size {} \
		>"$out/$s.json" 2>"$out/$s.err" || echo "strategy $s exited $?" >&2
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = {}
print(f"{'strategy':8} {'answer':>6} {'trials':>6} {'seconds':>8}")
for s in ("model", "bisect"):
    r = json.load(open(f"{out}/{s}.json"))
    rows[s] = r
    print(f"{s:8} {r['answer']:>6} {len(r['trials']):>6} {r['seconds']:>8.1f}")
m, b = rows["model"], rows["bisect"]
print(f"time ratio model/bisect: {m['seconds']/b['seconds']:.2f}")
for s, r in rows.items():
    print(f"\n{s}: n size outcome seconds peak_alloc_GiB peak_reserved_GiB peak_nvml_GiB")
    for t in r["trials"]:
        g = lambda k: t.get(k, 0) / 2**30
        print(f"  {t['n']:2} {t['batch_size']:5} {t['outcome']:8} {t['seconds']:6.1f} {g('peak_allocated_bytes'):7.2f} {g('peak_reserved_bytes'):7.2f} {g('peak_device_bytes'):7.2f}")
PY
