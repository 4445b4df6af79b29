#!/usr/bin/env bash
# Session 12, call 2's diagnostics before the card zoo (bench/gpu_session12b.sh):
# which packages make the fork server unsafe (and their import seconds), and
# whether side-by-side trials slow each other through CPU threads.
# Usage: bench/gpu_session12b_pre.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
timeout 80 python3 bench/import_hazards.py torch,torchvision,lightning torch,transformers numpy,torch jax,optax \
	>"$out/hazards.txt" 2>&1
timeout 140 python3 bench/shared_threads.py 2003 >"$out/shared_threads.txt" 2>&1
