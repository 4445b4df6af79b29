#!/usr/bin/env bash
# Issue 11's GPU checks, on one GPU (GPU, default 0), with the examples:
#   busy      a process holding 2 GiB: the search is refused before its first
#             trial; then the same process started during trial 2: that trial
#             is re-run
#   same-gpu  a second search on the same GPU with the same database while the
#             first runs: refused, naming the first
#   soak      SimCLR at 128 under --memory-limit 24GiB, --soak 60s, with an
#             HTML report: the soak's peak per step
# Writes summary.txt and all.tgz (every log, JSON and report) under OUTDIR:
# two files, as the device machine brings back few. About 3 minutes on an
# H200 (measured: 2026-11-30-issues10-11-h200x2.txt).
# Usage: bench/gpu_issue11.sh [BATCHFIT] [OUTDIR] [PARTS...]
set -u
bf=${1:-batchfit}
out=${2:-bench-out}
shift $(($# < 2 ? $# : 2))
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(busy same-gpu soak)
gpu=${GPU:-0}
py=$(command -v python3)
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=$(mktemp -d)
export PYTHONUNBUFFERED=1
T0=$SECONDS
log() { echo "[$((SECONDS - T0))s] $*" | tee -a "$w/summary.txt"; }
caught=("$py" examples/caught_oom/train.py --batch-size {})
# hog GIB SECONDS: a stranger holding GIB GiB on the GPU for SECONDS.
hog() {
	CUDA_VISIBLE_DEVICES=$gpu "$py" -c "import torch, time; x = torch.empty($1 << 30, dtype=torch.uint8, device='cuda'); print('held', flush=True); time.sleep($2)"
}

busy() {
	hog 2 25 >"$w/hog1.txt" 2>&1 &
	local h=$!
	until grep -q held "$w/hog1.txt" 2>/dev/null; do sleep 0.5; done
	"$bf" search --no-db --gpus "$gpu" --max 64 -- "${caught[@]}" >"$w/busy-refused.out" 2>"$w/busy-refused.err"
	log "busy: refused with exit $? (want 1), stdout $(wc -c <"$w/busy-refused.out") bytes (want 0)"
	wait $h
	"$bf" search --no-db --json --gpus "$gpu" --max 64 --log-dir "$w/logs-busy-during" -- "${caught[@]}" >"$w/busy-during.json" 2>"$w/busy-during.err" &
	local s=$!
	until ls "$w"/logs-busy-during/trial-002-* >/dev/null 2>&1 || ! kill -0 $s 2>/dev/null; do sleep 0.3; done
	hog 2 8 >"$w/hog2.txt" 2>&1
	wait $s
	log "busy: during a trial, exit $?, $(grep -c 'while it ran; running it again' "$w/busy-during.err") trial(s) re-run (want ≥ 1)"
}

same_gpu() {
	"$bf" search --db "$w/h.db" --gpus "$gpu" --max 64 --log-dir "$w/logs-first" -- "${caught[@]}" >"$w/first.out" 2>"$w/first.err" &
	local a=$!
	until ls "$w"/logs-first/trial-001-* >/dev/null 2>&1; do sleep 0.3; done
	"$bf" search --db "$w/h.db" --gpus "$gpu" --max 64 -- "${caught[@]}" --lr 0.002 >"$w/second.out" 2>"$w/second.err"
	log "same-gpu: second search exit $? (want 1): $(grep -m1 'error' "$w/second.err")"
	wait $a
	log "same-gpu: first search exit $? (want 0): $(head -1 "$w/first.out")"
}

soak() {
	"$bf" search --no-db --json --gpus "$gpu" --memory-limit 24GiB --steps 2 --min 128 --max 128 --soak 60s \
		--report "$w/soak.html" --log-dir "$w/logs-soak" -- "$py" examples/simclr_resnet50/train.py --batch-size {} >"$w/soak.json" 2>"$w/soak.err"
	log "soak: exit $? (want 0)"
	"$py" - "$w/soak.json" <<'PY' | tee -a "$w/summary.txt"
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]  # docs/json.md
for s in r["soaks"]:
    peaks = s.get("step_peak_bytes") or []
    print(f"soak at {s['batch_size']}: {s['outcome']} after {s['seconds']:.1f}s, {s.get('steps')} steps, "
          f"peaks {peaks[0] / 2**30 if peaks else 0:.2f} -> {peaks[-1] / 2**30 if peaks else 0:.2f} GiB; {s['reason'] or ''}")
print(f"answer {r.get('answer')}, status {r.get('status')}, warnings {r.get('warnings')}")
PY
}

for part in "${parts[@]}"; do
	case $part in
	busy) busy ;;
	same-gpu) same_gpu ;;
	soak) soak ;;
	*) echo "gpu_issue11: unknown part $part (busy, same-gpu, soak)" >&2 ;;
	esac
done
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
