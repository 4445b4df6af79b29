#!/usr/bin/env bash
# Session 13's first GPU call, one H200: the zoo on the whole card (no limit; preload) with session 13's
# planner (a reach window probes its top once lo is in it; two failures alike to the byte prove a failure
# on the card): simclr, hf, lm, jax, cut at CARD_S (560 s). Truths from bench/zoo-truth.json.
# Logs in WORK, tarred into OUTDIR/all.tgz with summary.txt.
# Usage: bench/gpu_session13a.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s13a}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
timeout "${CARD_S:-560}" python3 bench/zoo.py --batchfit "$bf" --out "$w/card" --conditions card \
	--workloads "${CARD_WORKLOADS:-simclr,hf,lm,jax}" --modes preload >"$w/card.out" 2>&1
{
	echo "== card"
	for f in "$w/card"/*-card-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/card.out"
	cat "$w/card/table.txt" 2>/dev/null
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
