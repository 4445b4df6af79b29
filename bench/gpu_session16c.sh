#!/usr/bin/env bash
# Session 16's third call on one H200: the JAX example on the whole card (preload, XLA's default pool of 75 %),
# never finished before (session 13 cut it at 195 s: 8 1078 2035 2248 2703 2979x 2971x 2837 2970...; the truth's
# bisection ran 3072), with the pool-failure risk rule of internal/search/risk.go: bench/gpu_session16b.sh on the
# whole card.
# Usage: bench/gpu_session16c.sh BATCHFIT OUTDIR
COND=card JAX_S=${JAX_S:-540} WORK=${WORK:-/tmp/s16c} exec bash "$(dirname "$0")/gpu_session16b.sh" "$@"
