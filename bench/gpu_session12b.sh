#!/usr/bin/env bash
# Session 12's second GPU call, one H200: the zoo on the whole card.
#   1. the truth of hf/card (fresh-process bisection, no batchfit), cut at TRUTH_S (200 s)
#   2. batchfit, preloading (the default), on the whole card: lm, simclr, hf, jax, cut at CARD_S (330 s)
# Logs in WORK, tarred into OUTDIR/all.tgz with summary.txt; the truth file
# bench/zoo-truth.json is copied there too (it gains hf/card).
# Usage: bench/gpu_session12b.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s12b}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
timeout "${TRUTH_S:-200}" python3 bench/zoo.py --batchfit "$bf" --out "$w/truth" --truth --conditions card \
	--workloads hf --modes none >"$w/truth.out" 2>&1
timeout "${CARD_S:-330}" python3 bench/zoo.py --batchfit "$bf" --out "$w/card" --conditions card \
	--workloads "${CARD_WORKLOADS:-lm,simclr,hf,jax}" --modes preload >"$w/card.out" 2>&1
{
	echo "== truth"
	tail -5 "$w/truth.out"
	echo "== card"
	for f in "$w/card"/*-card-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/card.out"
} >"$w/summary.txt" 2>&1
cp bench/zoo-truth.json "$w/zoo-truth.json"
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
