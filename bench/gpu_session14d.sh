#!/usr/bin/env bash
# Session 14's fourth GPU call, one H200: is Lightning's whole-card boundary batchfit's or the card's?
# Call 2's plain bisection ran 11664 and failed 11672 (cuBLAS could not allocate), call 3's crashed at 11668
# (CUDNN_STATUS_INTERNAL_ERROR); batchfit's forked search in call 3 ran 11651 twice and failed 11652 twice.
#   1. the plain program (no batchfit, as fresh_bisect.py runs it) at 11652 twice and 11664 once
#   2. batchfit at 11652 alone (--min = --max), fresh processes (--no-preload), then forked (preload)
# Logs in WORK, tarred into OUTDIR/all.tgz with summary.txt.
# Usage: bench/gpu_session14d.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s14d}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
prog=(examples/lightning_resnet/train.py fit --trainer.precision 16-mixed --trainer.logger false
	--trainer.enable_checkpointing false --trainer.enable_progress_bar false --trainer.enable_model_summary false)
plain() { # SIZE N
	local s
	s=$(date +%s.%N)
	python3 "${prog[@]}" --data.batch_size "$1" --trainer.max_steps 3 >"$w/plain-$1-$2.out" 2>"$w/plain-$1-$2.err"
	local rc=$?
	echo "plain $1 ($2): exit $rc $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s" \
		"$(grep -m1 -o 'OutOfMemoryError.\{0,50\}\|[A-Z]*_STATUS_[A-Z_]*' "$w/plain-$1-$2.err")" >>"$w/plain.txt"
}
plain 11652 1
plain 11652 2
plain 11664 1
one() { # NAME FLAGS...
	local name=$1
	shift
	timeout 150 "$bf" search --no-db --json --steps 3 --min 11652 --max 11652 --log-dir "$w/logs-$name" "$@" \
		-- python3 "${prog[@]}" --data.batch_size {} >"$w/$name.json" 2>"$w/$name.err"
	echo "$name: exit $? $(python3 bench/record_line.py "$w/$name.json")" >>"$w/one.txt"
}
one fresh --no-preload
one forked
{
	cat "$w/plain.txt"
	cat "$w/one.txt"
	tail -3 "$w/fresh.err" "$w/forked.err"
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
