#!/usr/bin/env bash
# Issue 10's targets on a GPU, with the examples that go with it:
#   jax-limit  examples/jax_optax at --memory-limit (24GiB): batchfit, and an
#              independent fresh-process bisection (bench/fresh_bisect.py) with
#              XLA_PYTHON_CLIENT_MEM_FRACTION = limit / the card's total memory
#   jax-card   the same on the whole card (XLA's own preallocation, as the
#              environment has it); the bisection starts from jax-limit's answer
#   caught     examples/caught_oom with --on-oom raise, exit0 and exit3 under
#              the limit: the three answers must be equal
#   hf         examples/hf_trainer under the limit, with batchfit --steps 3 and
#              no --max_steps (the program would train for minutes), and with
#              --max_steps 3: the two answers must be equal
# Prints a table (workload, mode, answer, trials, seconds, agrees) and writes
# every run's JSON and stderr, table.txt and summary.json under OUTDIR.
# About 9-11 minutes on one H200 for all parts (estimated before its first
# run); name parts to split it between calls.
# Usage: bench/gpu_issue10.sh [BATCHFIT] [OUTDIR] [PARTS...]
#        (default: batchfit on PATH, ./bench-out, all parts)
# Environment: LIMIT (24GiB; GiB or MiB), BF_ARGS (extra flags for every
# search), BF_JAX_ARGS (extra flags for the JAX searches, e.g. --framework
# jax), JAX_START (32, the bisection's first size), HF_TIMEOUT (90s, batchfit
# --timeout for the HF searches, so that a trial the step limit does not stop
# cannot run for minutes).
set -euo pipefail
bf=${1:-batchfit}
out=${2:-bench-out}
shift $(($# < 2 ? $# : 2))
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(jax-limit jax-card caught hf)
for part in "${parts[@]}"; do
	case $part in
	jax-limit | jax-card | caught | hf) ;;
	*)
		echo "gpu_issue10: unknown part $part (jax-limit, jax-card, caught, hf)" >&2
		exit 2
		;;
	esac
done
limit=${LIMIT:-24GiB}
read -r -a bf_args <<<"${BF_ARGS:-}"
read -r -a bf_jax_args <<<"${BF_JAX_ARGS:-}"
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=$(command -v python3)

# The limit as XLA's memory fraction, as batchfit computes it: limit bytes
# over the card's total (nvidia-smi's MiB).
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
fraction=$("$py" - "$limit" "$total_mib" <<'PY'
import re, sys
m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(GiB|MiB)", sys.argv[1])
if not m:
    sys.exit(f"LIMIT={sys.argv[1]}: give it in GiB or MiB")
limit = float(m[1]) * {"GiB": 2**30, "MiB": 2**20}[m[2]]
print(repr(limit / (int(sys.argv[2]) * 2**20)))
PY
)
echo "gpu_issue10: card ${total_mib} MiB, --memory-limit $limit = XLA fraction $fraction" >&2

# Record what ran, and warm the file cache once, so that no run pays the
# first imports alone.
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader -i 0 >"$out/versions.txt"
"$py" -c 'import torch, torchvision; torch.zeros(1).cuda(); print("torch", torch.__version__, "torchvision", torchvision.__version__)' >>"$out/versions.txt"
"$py" -c 'import jax, optax; print("jax", jax.__version__, "optax", optax.__version__)' >>"$out/versions.txt" ||
	echo "gpu_issue10: jax or optax does not import" >&2
"$py" -c 'import accelerate, transformers; from transformers import Trainer; print("transformers", transformers.__version__, "accelerate", accelerate.__version__)' >>"$out/versions.txt" ||
	echo "gpu_issue10: transformers does not import" >&2

# search NAME FLAGS... -- COMMAND...: one batchfit search, its JSON in
# NAME.json, its stderr in NAME.err, its exit status in NAME.rc.
search() {
	local name=$1 rc=0 start=$SECONDS
	shift
	"$bf" search --no-db --json --log-dir "$out/logs-$name" "${bf_args[@]}" "$@" >"$out/$name.json" 2>"$out/$name.err" || rc=$?
	echo "$rc" >"$out/$name.rc"
	echo "gpu_issue10: $name: exit $rc after $((SECONDS - start))s" >&2
}

# bisect NAME FLAGS... -- COMMAND...: the fresh-process reference.
bisect() {
	local name=$1 start=$SECONDS
	shift
	"$py" "$here/bench/fresh_bisect.py" --json "$out/$name.json" --log-dir "$out/logs-$name" "$@" \
		>/dev/null 2>"$out/$name.err" || true
	echo "gpu_issue10: $name: $((SECONDS - start))s" >&2
}

jax=("$py" "$here/examples/jax_optax/train.py" --batch-size {} --steps 3)
caught=("$py" "$here/examples/caught_oom/train.py" --batch-size {} --steps 3)
hf=("$py" "$here/examples/hf_trainer/train.py" --output_dir "$out/hf-output" --per_device_train_batch_size {}
	--bf16 --report_to none --save_strategy no)
for part in "${parts[@]}"; do
	case $part in
	jax-limit)
		search bf-jax-limit --memory-limit "$limit" --steps 3 "${bf_jax_args[@]}" -- "${jax[@]}"
		bisect bisect-jax-limit --start "${JAX_START:-32}" \
			--env XLA_PYTHON_CLIENT_MEM_FRACTION="$fraction" --unset XLA_CLIENT_MEM_FRACTION -- "${jax[@]}"
		;;
	jax-card)
		search bf-jax-card --steps 3 "${bf_jax_args[@]}" -- "${jax[@]}"
		# What fits in the limit fits on the whole card: a sound place to start.
		start=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["answer"] or "")' "$out/bisect-jax-limit.json" 2>/dev/null || true)
		bisect bisect-jax-card --start "${start:-${JAX_START:-32}}" -- "${jax[@]}"
		;;
	caught)
		for form in raise exit0 exit3; do
			search "bf-caught-$form" --memory-limit "$limit" --steps 3 -- "${caught[@]}" --on-oom "$form"
		done
		;;
	hf)
		search bf-hf-max-steps --memory-limit "$limit" --steps 3 --timeout "${HF_TIMEOUT:-90s}" -- "${hf[@]}" --max_steps 3
		search bf-hf-steps --memory-limit "$limit" --steps 3 --timeout "${HF_TIMEOUT:-90s}" -- "${hf[@]}"
		;;
	esac
done

"$py" - "$out" "$limit" "$fraction" <<'PY' | tee "$out/table.txt"
import json, os, sys
out, limit, fraction = sys.argv[1:]

def exit_code(name):
    try:
        with open(os.path.join(out, name + ".rc")) as f:
            return int(f.read())
    except OSError:
        return None

def load(name):
    """The run's JSON record: the first run of batchfit's --json document
    (docs/json.md), or fresh_bisect.py's result; None when there is none."""
    try:
        with open(os.path.join(out, name + ".json")) as f:
            r = json.load(f)
    except (OSError, ValueError):
        return None
    if isinstance(r, dict) and "schema_version" in r:
        return r["runs"][0] if r["runs"] else None
    return r if isinstance(r, dict) else None

# (workload, mode, run, reference run): a run agrees when its answer is its
# reference's.
rows = [
    ("jax_optax", f"batchfit --memory-limit {limit}", "bf-jax-limit", "bisect-jax-limit"),
    ("jax_optax", f"fresh bisection, XLA fraction {float(fraction):.5f}", "bisect-jax-limit", None),
    ("jax_optax", "batchfit, whole card", "bf-jax-card", "bisect-jax-card"),
    ("jax_optax", "fresh bisection, whole card", "bisect-jax-card", None),
    ("caught_oom --on-oom raise", f"batchfit --memory-limit {limit}", "bf-caught-raise", None),
    ("caught_oom --on-oom exit0", f"batchfit --memory-limit {limit}", "bf-caught-exit0", "bf-caught-raise"),
    ("caught_oom --on-oom exit3", f"batchfit --memory-limit {limit}", "bf-caught-exit3", "bf-caught-raise"),
    ("hf_trainer --max_steps 3", f"batchfit --steps 3 --memory-limit {limit}", "bf-hf-max-steps", None),
    ("hf_trainer (no --max_steps)", f"batchfit --steps 3 --memory-limit {limit}", "bf-hf-steps", "bf-hf-max-steps"),
]
summary = []
print(f"{'workload':30} {'mode':44} {'answer':>6} {'trials':>6} {'seconds':>8}  agrees")
for workload, mode, name, ref in rows:
    r = load(name)
    if r is None and not os.path.exists(os.path.join(out, name + ".json")):
        continue
    answer = r.get("answer") if r else None
    trials = len(r.get("trials") or []) if r else None
    seconds = r.get("seconds") if r else None
    agrees = None
    if ref:
        other = load(ref)
        if other is not None and answer is not None:
            agrees = answer == other.get("answer") and bool(answer)
    code = exit_code(name)
    note = f"exit {code}" if code else ""
    if r is None:
        note = f"{note}, no record" if note else "no record"
    elif r.get("error"):
        note = f"{note}: " if note else ""
        note += str(r["error"]).splitlines()[0][:80]
    note = f"  ({note}; see {name}.err)" if note else ""
    summary.append(dict(workload=workload, mode=mode, run=name, answer=answer, trials=trials,
                        seconds=seconds, reference=ref, agrees=agrees))
    cell = lambda v, f="": "-" if v is None else format(v, f)
    yes_no = "" if ref is None else {True: "yes", False: "NO", None: "?"}[agrees]
    print(f"{workload:30} {mode:44} {cell(answer):>6} {cell(trials):>6} {cell(seconds, '.1f'):>8}  {yes_no}{note}")
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(dict(limit=limit, xla_fraction=float(fraction), rows=summary), f, indent=1)

for workload, mode, name, _ in rows:
    r = load(name)
    if not r or not r.get("trials"):
        continue
    print(f"\n{name}: n size outcome seconds phase peak_alloc_GiB peak_nvml_GiB")
    for t in r["trials"]:
        g = lambda k: (t.get(k) or 0) / 2**30
        print(f"  {t['n']:2} {t['batch_size']:6} {t['outcome']:8} {t['seconds']:6.1f} {t.get('phase') or '':8} "
              f"{g('peak_allocated_bytes'):7.2f} {g('peak_device_bytes'):7.2f}")
PY
