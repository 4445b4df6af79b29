#!/usr/bin/env bash
# What the examples' READMEs promise, checked on one GPU under --memory-limit LIMIT (24GiB):
#   caught     examples/caught_oom with --on-oom raise, exit0 and exit3: one answer for all three
#              (batchfit sees an OOM that the program catches, whatever its exit status)
#   hf         examples/hf_trainer, batchfit --steps 3, with and without --max_steps 3: one answer
#              (batchfit stops every trial after its steps, so the Trainer needs no max_steps)
#   callbacks  a search of sizes 8 to 16 of examples/lightning_resnet and of examples/hf_trainer, then
#              each trained with batchfit's callback reading that search's JSON: the answer is applied;
#              Lightning again with --trainer.precision 32-true, which the callback must refuse
#   oneline    examples/hf_trainer/oneline.py and examples/lightning_resnet/oneline.py, which find
#              their own size (batchfit.batch_size(), the BatchFit callback; both for 24GiB, so keep
#              LIMIT at that), each run plainly twice: the first searches and trains at the answer of
#              a CLI search of the same script, the second trains at it from the history (a history
#              of its own under OUTDIR)
# jax_optax, and every example against a fresh-process bisection, is bench/zoo.py's.
# Prints a table (part, run, answer, trials, seconds, check: yes or NO against what the part promises),
# then every search's trials (bench/record_line.py). Writes each run's JSON, stderr and logs and
# table.txt under OUTDIR. Measured: bench/results/examples-h200.txt.
# Usage: bench/gpu_examples.sh [BATCHFIT] [OUTDIR] [PARTS...]
#        (default: batchfit on PATH, ./bench-out, every part)
# Environment: LIMIT (24GiB), BF_ARGS (more flags for every search), HF_TIMEOUT (120s: a trial's
# --timeout for the HF Trainer, which without --max_steps would train for minutes were it not stopped),
# INSTALLED (set: the scripts import the batchfit package that python3 finds, say a wheel's, not this
# clone's python/).
set -uo pipefail
bf=${1:-batchfit}
out=${2:-bench-out}
shift $(($# < 2 ? $# : 2))
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(caught hf callbacks oneline)
limit=${LIMIT:-24GiB}
hf_timeout=${HF_TIMEOUT:-120s}
read -r -a bf_args <<<"${BF_ARGS:-}"
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=$(command -v python3)
# batchfit.lightning, batchfit.hf: this clone's, unless INSTALLED names the installed package's.
[ -n "${INSTALLED:-}" ] || export PYTHONPATH=$here/python${PYTHONPATH:+:$PYTHONPATH}

# search NAME FLAGS... -- COMMAND...: NAME.json, NAME.err, NAME.rc
search() {
	local name=$1
	shift
	"$bf" search --no-db --json --memory-limit "$limit" --log-dir "$out/logs-$name" "${bf_args[@]}" "$@" \
		>"$out/$name.json" 2>"$out/$name.err"
	echo $? >"$out/$name.rc"
}
# train NAME COMMAND...: NAME.out (stdout and stderr), NAME.rc
train() {
	local name=$1
	shift
	"$@" >"$out/$name.out" 2>&1
	echo $? >"$out/$name.rc"
}
answer() { "$py" -c 'import json, sys; print((json.load(open(sys.argv[1]))["runs"] or [{}])[0].get("answer") or 0)' "$1" 2>/dev/null || echo 0; }

caught=("$py" "$here/examples/caught_oom/train.py" --batch-size {})
hf=("$py" "$here/examples/hf_trainer/train.py" --output_dir "$out/hf-output" --bf16 --report_to none
	--save_strategy no --disable_tqdm true)
# The one-line scripts search with the batchfit the Python API finds: this one.
export BATCHFIT_BINARY=$(readlink -f "$(command -v "$bf")")
hf_one=("$py" "$here/examples/hf_trainer/oneline.py" --output_dir "$out/hf-output" --bf16 --report_to none
	--save_strategy no --disable_tqdm true --max_steps 20)
light_one=("$py" "$here/examples/lightning_resnet/oneline.py" --max_steps 20)
light=("$py" "$here/examples/lightning_resnet/train.py" fit --trainer.precision 16-mixed --trainer.logger false
	--trainer.enable_checkpointing false --trainer.enable_progress_bar false --trainer.enable_model_summary false)
for part in "${parts[@]}"; do
	case $part in
	caught)
		for form in raise exit0 exit3; do
			search "caught-$form" --steps 3 -- "${caught[@]}" --on-oom "$form"
		done
		;;
	hf)
		search hf-max-steps --steps 3 --timeout "$hf_timeout" -- "${hf[@]}" --per_device_train_batch_size {} --max_steps 3
		search hf-steps --steps 3 --timeout "$hf_timeout" -- "${hf[@]}" --per_device_train_batch_size {}
		;;
	callbacks)
		search lightning-quick --steps 3 --min 8 --max 16 -- "${light[@]}" --data.batch_size {}
		cb=(--trainer.callbacks+=batchfit.lightning.BatchSizeFromBatchfit
			--trainer.callbacks.init_args.result "$out/lightning-quick.json")
		train lightning-apply "${light[@]}" --data.batch_size 8 --trainer.max_steps 2 "${cb[@]}"
		train lightning-refuse "${light[@]/16-mixed/32-true}" --data.batch_size 8 --trainer.max_steps 2 "${cb[@]}"
		search hf-quick --steps 3 --min 8 --max 16 --timeout "$hf_timeout" -- "${hf[@]}" --per_device_train_batch_size {}
		train hf-apply "${hf[@]}" --per_device_train_batch_size 8 --max_steps 2 --batchfit_result "$out/hf-quick.json"
		;;
	oneline)
		for one in hf light; do
			ref=("${hf_one[@]}")
			[ $one = hf ] || ref=("${light_one[@]}")
			search "$one-oneline-cli" --steps 3 -- "${ref[@]}"
			train "$one-oneline" env XDG_CACHE_HOME="$out/oneline-cache" "${ref[@]}"
			train "$one-oneline-again" env XDG_CACHE_HOME="$out/oneline-cache" "${ref[@]}"
		done
		;;
	*) echo "gpu_examples: unknown part $part (caught, hf, callbacks, oneline)" >&2 ;;
	esac
done

"$py" - "$out" "$here/bench" <<'PY' | tee "$out/table.txt"
import json, os, sys
out, bench = sys.argv[1:]
sys.path.insert(0, bench)
from record_line import line  # noqa: E402

def run(name):
    try:
        return (json.load(open(os.path.join(out, name + ".json")))["runs"] or [{}])[0]
    except (OSError, ValueError, KeyError):
        return None

def rc(name):
    try:
        return int(open(os.path.join(out, name + ".rc")).read())
    except (OSError, ValueError):
        return None

def text(name):
    try:
        return open(os.path.join(out, name + ".out"), errors="replace").read()
    except OSError:
        return ""

def same(name, ref):
    a, b = run(name), run(ref)
    if not (a and b):
        return None
    return bool(a.get("answer")) and a.get("answer") == b.get("answer")

def applied(name, search):
    size = (run(search) or {}).get("answer")
    return bool(size) and rc(name) == 0 and f" -> {size} " in text(name)

def trained(name, search, attr, history=False):
    """A plain run of a one-line script: it said it would train at the
    answer of the CLI's search of it, and did (from the history)."""
    size = (run(search) or {}).get("answer")
    out = text(name)
    said = f"batchfit: batch size {size} (answer {size} (" + ("from the history" if history else "")
    return bool(size) and rc(name) == 0 and said in out and f"trained at {attr} {size}\n" in out

def refused(name):
    return rc(name) not in (None, 0) and "ResultMismatch" in text(name)

# (part, label, the run's file name, its check or None)
rows = [
    ("caught", "--on-oom raise", "caught-raise", None),
    ("caught", "--on-oom exit0 (= raise)", "caught-exit0", lambda: same("caught-exit0", "caught-raise")),
    ("caught", "--on-oom exit3 (= raise)", "caught-exit3", lambda: same("caught-exit3", "caught-raise")),
    ("hf", "--max_steps 3", "hf-max-steps", None),
    ("hf", "no --max_steps (= --max_steps 3)", "hf-steps", lambda: same("hf-steps", "hf-max-steps")),
    ("callbacks", "lightning, sizes 8 to 16", "lightning-quick", None),
    ("callbacks", "lightning trained at the answer", "lightning-apply", lambda: applied("lightning-apply", "lightning-quick")),
    ("callbacks", "lightning, 32-true refused", "lightning-refuse", lambda: refused("lightning-refuse")),
    ("callbacks", "hf, sizes 8 to 16", "hf-quick", None),
    ("callbacks", "hf trained at the answer", "hf-apply", lambda: applied("hf-apply", "hf-quick")),
    ("oneline", "hf, the CLI's search of it", "hf-oneline-cli", None),
    ("oneline", "hf, run: trained at the answer", "hf-oneline",
     lambda: trained("hf-oneline", "hf-oneline-cli", "per_device_train_batch_size")),
    ("oneline", "hf, again: from the history", "hf-oneline-again",
     lambda: trained("hf-oneline-again", "hf-oneline-cli", "per_device_train_batch_size", history=True)),
    ("oneline", "lightning, the CLI's search of it", "light-oneline-cli", None),
    ("oneline", "lightning, run: trained at it", "light-oneline",
     lambda: trained("light-oneline", "light-oneline-cli", "batch_size")),
    ("oneline", "lightning, again: from the history", "light-oneline-again",
     lambda: trained("light-oneline-again", "light-oneline-cli", "batch_size", history=True)),
]
print(f"{'part':10} {'run':34} {'answer':>6} {'trials':>6} {'seconds':>8}  check")
searches = []
for part, label, name, check in rows:
    if rc(name) is None:
        continue
    r = run(name)
    if r is not None:
        searches.append(name)
    r = r or {}
    cell = lambda v, f="": "-" if v is None else format(v, f)
    trials = len(r["trials"]) if r.get("trials") is not None else None
    verdict = "" if check is None else {True: "yes", False: "NO", None: "?"}[check()]
    print(f"{part:10} {label:34} {cell(r.get('answer')):>6} {cell(trials):>6} {cell(r.get('seconds'), '.1f'):>8}  "
          f"{verdict} (exit {rc(name)})")
print()
for name in searches:
    print(f"{name}: {line(os.path.join(out, name + '.json'))}")
PY
