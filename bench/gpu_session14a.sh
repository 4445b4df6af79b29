#!/usr/bin/env bash
# Session 14's first GPU call, one H200:
#   1. the machine's facts that bear on start-up: CPUs, the interpreter's prefix, the file system under
#      site-packages, an empty interpreter's start, `python3 -X importtime` of torch and torchvision (warm)
#   2. bench/fork_phases.py: where a forked trial's seconds go (CUDA's start, the model, the first step,
#      the exit), with and without the CUDA math libraries' lazily loaded objects loaded in the parent
#   3. SimCLR at 24 GiB (allocator scope): preload, --no-preload, alternating, two pairs; the log files'
#      times say when the fork server started (forkserver.log) and when the first trial forked
#   4. the zoo at 24 GiB (preload): lm, hf, lightning, cut at ZOO_S (330 s): session 13's late fixes
#      (trials wait for what the guess missed; the hand-over's line verdict) had not run on a GPU
# Logs in WORK, tarred into OUTDIR/all.tgz with summary.txt.
# Usage: bench/gpu_session14a.sh BATCHFIT OUTDIR
set -u
bf=$1
out=$2
mkdir -p "$out"
out=$(cd "$out" && pwd)
w=${WORK:-/tmp/s14a}
mkdir -p "$w"
export PYTHONUNBUFFERED=1
secs() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 3))" "$@"; }
{
	echo "cpus $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
	site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
	echo "python $(python3 -c 'import sys; print(sys.version.split()[0], sys.prefix)'); site-packages $site"
	df -T "$site" | tail -1
	for flags in "" "-S" "-I"; do
		s=$(date +%s.%N)
		python3 $flags -c pass
		echo "python3 $flags -c pass: $(secs "$s" "$(date +%s.%N)") s"
	done
	for i in 1 2; do
		s=$(date +%s.%N)
		python3 -X importtime -c 'import torch, torchvision' 2>"$w/importtime-$i.txt"
		echo "import torch, torchvision ($i): $(secs "$s" "$(date +%s.%N)") s"
	done
	echo "slowest imports (self, cumulative us):"
	sort -t'|' -k2 -n -r "$w/importtime-2.txt" | head -25
} >"$w/facts.txt" 2>&1
python3 bench/fork_phases.py --batch 156 --reps 3 >"$w/phases.txt" 2>&1
simclr() { # NAME FLAGS...: a SimCLR search at 24 GiB, allocator scope
	local name=$1
	shift
	"$bf" search --no-db --json --memory-limit 24GiB --memory-limit-scope allocator --steps 2 \
		--log-dir "$w/logs-$name" "$@" -- python3 examples/simclr_resnet50/train.py --batch-size {} \
		>"$w/$name.json" 2>"$w/$name.err"
	echo "$name: exit $? $(python3 bench/record_line.py "$w/$name.json")" >>"$w/simclr.txt"
	stat -c '%n %.9Y' "$w/logs-$name"/forkserver.log "$w/logs-$name"/trial-00[12]-*.err >>"$w/times-$name.txt" 2>&1
}
simclr preload-1
simclr nopreload-1 --no-preload
simclr preload-2
simclr nopreload-2 --no-preload
timeout "${ZOO_S:-330}" python3 bench/zoo.py --batchfit "$bf" --out "$w/zoo" --conditions 24GiB \
	--workloads "${ZOO_WORKLOADS:-lm,hf,lightning}" --modes preload >"$w/zoo.out" 2>&1
{
	cat "$w/facts.txt"
	echo "== fork phases"
	cat "$w/phases.txt"
	echo "== simclr"
	cat "$w/simclr.txt"
	python3 /dev/stdin "$w" <<'PY'
import json, sys
w = sys.argv[1]
def run(name):
    try:
        return json.load(open(f"{w}/{name}.json"))["runs"][0]
    except Exception:
        return None
for i in (1, 2):
    p, n = run(f"preload-{i}"), run(f"nopreload-{i}")
    if p and n:
        print(f"pair {i}: preload {p['seconds']:.1f} s / --no-preload {n['seconds']:.1f} s = {p['seconds'] / n['seconds']:.2f}")
for name in ("preload-1", "preload-2"):
    r = run(name)
    if not r:
        continue
    from datetime import datetime
    whole, _, frac = r["started"].rstrip("Z").partition(".")
    t0 = datetime.fromisoformat(whole + "+00:00").timestamp() + float("0." + (frac or "0"))
    times = {}
    for line in open(f"{w}/times-{name}.txt"):
        parts = line.split()
        if len(parts) == 2:
            times[parts[0].rsplit("/", 1)[-1]] = float(parts[1])
    server = times.get("forkserver.log")
    first = min((v for k, v in times.items() if k.startswith("trial-001")), default=None)
    if server and first:
        print(f"{name}: server started {server - t0:.2f} s after the run began; first trial forked {first - server:.2f} s after that")
PY
	echo "== zoo 24GiB"
	for f in "$w/zoo"/*-24GiB-*.json; do
		[ -f "$f" ] && echo "$(basename "$f"): $(python3 bench/record_line.py "$f")"
	done
	cat "$w/zoo.out"
	cat "$w/zoo/table.txt" 2>/dev/null
} >"$w/summary.txt" 2>&1
cp "$w/summary.txt" "$out/summary.txt"
tar czf "$out/all.tgz" -C "$w" .
