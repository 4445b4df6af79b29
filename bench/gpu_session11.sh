#!/usr/bin/env bash
# Session 11's first GPU call, on a machine of two GPUs, one lane per GPU:
#   lane 0  SimCLR at 24 GiB: the default (whole process), allocator scope
#           with preloading, allocator scope with --no-preload, worker mode;
#           then the zoo's missing whole-card truths for SimCLR and the LM
#   lane 1  Lightning: a quick search, the callback applied and refused,
#           the fraction probe (env vs API) at FRACTION_SIZES; the LM's
#           24 GiB truth; SimCLR --throughput
# Each lane is cut at LANE_S seconds; every log stays in WORK, which is
# tarred into OUTDIR/all.tgz with summary.txt at the end, whatever happened.
# Usage: bench/gpu_session11.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s11}
mkdir -p "$w"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
py=$(command -v python3)
T0=$(date +%s)
log() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$w/summary.txt"; }
"$py" -c 'import torch, torchvision' # warm the file cache for both lanes

simclr() { # NAME FLAGS...: a SimCLR search at 24 GiB on GPU 0
	local name=$1
	shift
	"$bf" search --no-db --json --gpus 0 --memory-limit 24GiB --steps 2 --log-dir "$w/logs-$name" "$@" \
		>"$w/$name.json" 2>"$w/$name.err"
	log "lane0 $name: exit $? $("$py" bench/record_line.py "$w/$name.json")"
}

lane0() {
	simclr simclr-process -- "$py" examples/simclr_resnet50/train.py --batch-size {}
	simclr simclr-alloc --memory-limit-scope allocator -- "$py" examples/simclr_resnet50/train.py --batch-size {}
	simclr simclr-alloc-nopreload --memory-limit-scope allocator --no-preload -- "$py" examples/simclr_resnet50/train.py --batch-size {}
	simclr simclr-worker --memory-limit-scope allocator --worker -- "$py" -m batchfit.worker examples/worker/simclr_trial.py:Trial
	"$py" bench/zoo.py --out "$w/zoo-truth0" --truth --modes none --gpu 0 --workloads lm,simclr --conditions card \
		>"$w/zoo-truth0.out" 2>&1
	log "lane0 truths (card): exit $? $(grep -h '"answer"' "$w"/zoo-truth0/truth-*.json 2>/dev/null | tr -d ' \n')"
}

lane1() {
	# The search picks GPU 1 itself (--gpus 1); the bare runs are shown only GPU 1.
	WORK=$w/l1 BF_ARGS="--gpus 1" bench/gpu_issue13.sh "$bf" "$w/l1out" lightning-quick >"$w/l1-quick.out" 2>&1
	WORK=$w/l1 CUDA_VISIBLE_DEVICES=1 bench/gpu_issue13.sh "$bf" "$w/l1out" lightning-apply >"$w/l1-apply.out" 2>&1
	log "lane1 lightning quick+apply: exit $?"
	sed 's/^/lane1 /' "$w/l1/summary.txt" >>"$w/summary.txt" 2>/dev/null
	WORK=$w/l1f FRACTION_SIZES="${FRACTION_SIZES:-2003 2004 2016}" CUDA_VISIBLE_DEVICES=1 bench/gpu_issue13.sh "$bf" "$w/l1fout" fraction \
		>"$w/l1-fraction.out" 2>&1
	sed 's/^/lane1 /' "$w/l1f/summary.txt" >>"$w/summary.txt" 2>/dev/null
	"$py" bench/zoo.py --out "$w/zoo-truth1" --truth --modes none --gpu 1 --workloads lm --conditions 24GiB \
		>"$w/zoo-truth1.out" 2>&1
	log "lane1 lm 24GiB truth: exit $? $(grep -h '"answer"' "$w"/zoo-truth1/truth-*.json 2>/dev/null | tr -d ' \n')"
	"$bf" search --no-db --json --gpus 1 --memory-limit 24GiB --steps 2 --throughput --log-dir "$w/logs-throughput" \
		-- "$py" examples/simclr_resnet50/train.py --batch-size {} >"$w/simclr-throughput.json" 2>"$w/simclr-throughput.err"
	log "lane1 simclr --throughput: exit $? $("$py" bench/record_line.py "$w/simclr-throughput.json")"
}

timeout "${LANE_S:-480}" bash -c "$(declare -f log simclr lane0); $(declare -p w bf py T0); lane0" &
timeout "${LANE_S:-480}" bash -c "$(declare -f log lane1); $(declare -p w bf py T0); lane1" &
wait
cp bench/zoo-truth.json "$w/" 2>/dev/null
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
