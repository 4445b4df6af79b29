#!/usr/bin/env bash
# Issue 12's proof on a GPU: the same search with every trial a fresh process
# and with trials forked from a preloading server (--preload), per workload:
#   simclr  examples/simclr_resnet50 (torch + torchvision)
#   lm      examples/transformer_lm (torch)
#   jax     examples/jax_optax (jax + optax)
# For each: answer, trials, seconds and forked trials of both runs, whether
# the answers agree, and for every batch size run in both, the peaks of the
# fresh and the forked trials side by side (torch's allocated and reserved,
# or JAX's, and NVML's) with the largest difference. Forked peaks must equal
# fresh ones within allocator noise: the allocated peak exactly for torch
# (the same allocations in the same order); reserved and NVML within a few
# MiB (the CUDA context and cuDNN/cuBLAS workspaces are made in the child in
# both). Writes every run's JSON and stderr, and table.txt, under OUTDIR.
# Usage: bench/gpu_preload.sh [BATCHFIT] [OUTDIR] [WORKLOADS...]
#        (default: batchfit on PATH, ./bench-out, all three)
# Environment: LIMIT (24GiB), BF_ARGS (extra flags for every search),
# STRATEGY (model; bisect runs about 18 trials a search, so more sizes are
# compared: the first trial, and those while the server imports, run fresh).
set -euo pipefail
bf=${1:-batchfit}
out=${2:-bench-out}
shift $(($# < 2 ? $# : 2))
loads=("$@")
[ ${#loads[@]} -gt 0 ] || loads=(simclr lm jax)
limit=${LIMIT:-24GiB}
read -r -a bf_args <<<"${BF_ARGS:-}"
mkdir -p "$out"
py=$(command -v python3)
for w in "${loads[@]}"; do
	case $w in
	simclr) prog=(examples/simclr_resnet50/train.py --batch-size {}) warm='import torch, torchvision' ;;
	lm) prog=(examples/transformer_lm/train.py --batch-size {}) warm='import torch' ;;
	jax) prog=(examples/jax_optax/train.py --batch-size {}) warm='import jax, optax' ;;
	*) echo "gpu_preload: unknown workload $w (simclr, lm, jax)" >&2; exit 2 ;;
	esac
	# Warm the file cache, so that neither run pays the first import alone.
	"$py" -c "$warm" || true
	for mode in fresh preload; do
		flags=()
		[ "$mode" = preload ] && flags=(--preload)
		"$bf" search --no-db --memory-limit "$limit" --steps 2 --json --strategy "${STRATEGY:-model}" "${flags[@]}" "${bf_args[@]}" \
			--log-dir "$out/logs-$w-$mode" -- "$py" "${prog[@]}" \
			>"$out/$w-$mode.json" 2>"$out/$w-$mode.err" || echo "$w $mode exited $?" >&2
	done
done
python3 - "$out" "${loads[@]}" <<'PY' | tee "$out/table.txt"
import json, sys
out, loads = sys.argv[1], sys.argv[2:]
G = 2**30
def load(w, m):
    try:
        return json.load(open(f"{out}/{w}-{m}.json"))["runs"][0]  # docs/json.md
    except Exception as e:
        print(f"{w} {m}: no record ({e})")
        return None
print(f"{'workload':8} {'mode':8} {'answer':>6} {'trials':>6} {'forked':>6} {'seconds':>8} {'s/trial':>8}")
for w in loads:
    runs = {m: load(w, m) for m in ("fresh", "preload")}
    for m, r in runs.items():
        if r:
            ts = r["trials"]
            forked = sum(1 for t in ts if t.get("forked"))
            print(f"{w:8} {m:8} {r['answer'] or '-':>6} {len(ts):>6} {forked:>6} {r['seconds']:>8.1f} {r['seconds'] / max(len(ts), 1):>8.2f}")
    a, b = runs["fresh"], runs["preload"]
    if not (a and b):
        continue
    same = (a.get("answer"), a.get("first_failure")) == (b.get("answer"), b.get("first_failure"))
    print(f"{w}: answers {'agree' if same else 'DIFFER'}: fresh {a.get('answer')}/{a.get('first_failure')}, preload {b.get('answer')}/{b.get('first_failure')}")
    fresh = {}
    for t in a["trials"]:
        if t["outcome"] == "ok":
            fresh.setdefault(t["batch_size"], t)
    print(f"  size  fresh/forked  alloc_GiB          reserved_GiB       nvml_GiB           seconds")
    worst = {"peak_allocated_bytes": 0, "peak_reserved_bytes": 0, "peak_device_bytes": 0}
    for t in b["trials"]:
        f = fresh.get(t["batch_size"])
        if not t.get("forked") or t["outcome"] != "ok" or f is None:
            continue
        cells = []
        for k in worst:
            x, y = f[k] or 0, t[k] or 0
            worst[k] = max(worst[k], abs(x - y))
            cells.append(f"{x / G:7.3f} {y / G:7.3f}")
        print(f"  {t['batch_size']:5} {'':12} " + "  ".join(cells) + f"  {f['seconds']:6.1f} {t['seconds']:6.1f}")
    print(f"  largest |fresh - forked|: " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in worst.items()))
PY
