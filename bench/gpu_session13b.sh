#!/usr/bin/env bash
# Session 13's second GPU call, one H200:
#   1. the page cache warmed for every mode alike (torch, torchvision, transformers, lightning, jax imported
#      once, timed), so that neither mode of the ratio pays the disk alone
#   2. SimCLR at 24 GiB (allocator scope, as issue 12's target): preload, --no-preload, preload,
#      --no-preload, alternating, each pair a ratio
#   3. the zoo at 24 GiB (preload): lm, hf, jax, cut at ZOO_S (250 s)
#   4. JAX on the whole card (preload; call 1 ran out of time before it), cut at CARD_S (110 s)
# Logs in WORK, tarred into OUTDIR/all.tgz with summary.txt.
# Usage: bench/gpu_session13b.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s13b}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
{
	for m in torch torchvision transformers lightning jax; do
		s=$(date +%s.%N)
		python3 -c "import $m" >/dev/null 2>&1
		echo "warm import $m: exit $? $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s"
	done
} >"$w/warm.txt" 2>&1
simclr() { # NAME FLAGS...: a SimCLR search at 24 GiB, allocator scope
	local name=$1
	shift
	"$bf" search --no-db --json --memory-limit 24GiB --memory-limit-scope allocator --steps 2 \
		--log-dir "$w/logs-$name" "$@" -- python3 examples/simclr_resnet50/train.py --batch-size {} \
		>"$w/$name.json" 2>"$w/$name.err"
	echo "$name: exit $? $(python3 bench/record_line.py "$w/$name.json")" >>"$w/simclr.txt"
}
simclr preload-1
simclr nopreload-1 --no-preload
simclr preload-2
simclr nopreload-2 --no-preload
timeout "${ZOO_S:-250}" python3 bench/zoo.py --batchfit "$bf" --out "$w/zoo" --conditions 24GiB \
	--workloads "${ZOO_WORKLOADS:-lm,hf,jax}" --modes preload >"$w/zoo.out" 2>&1
timeout "${CARD_S:-110}" python3 bench/zoo.py --batchfit "$bf" --out "$w/card" --conditions card \
	--workloads jax --modes preload >"$w/card.out" 2>&1
{
	cat "$w/warm.txt"
	echo "== simclr"
	cat "$w/simclr.txt"
	python3 /dev/stdin "$w" <<'PY'
import json, sys
w = sys.argv[1]
def secs(name):
    try:
        return json.load(open(f"{w}/{name}.json"))["runs"][0]["seconds"]
    except Exception:
        return None
for i in (1, 2):
    p, n = secs(f"preload-{i}"), secs(f"nopreload-{i}")
    if p and n:
        print(f"pair {i}: preload {p:.1f} s / --no-preload {n:.1f} s = {p / n:.2f}")
PY
	echo "== zoo 24GiB"
	for f in "$w/zoo"/*-24GiB-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/zoo.out"
	cat "$w/zoo/table.txt" 2>/dev/null
	echo "== card"
	for f in "$w/card"/*-card-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/card.out"
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
