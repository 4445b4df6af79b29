"""The zoo: for each workload (the examples) and each condition (a 24 GiB
cap, the whole card), batchfit in each mode against an independent
fresh-process bisection (bench/fresh_bisect.py, no batchfit), side by side:
answer, trials and seconds, with the preloading mode's time as a ratio of
the fresh-process mode's and two GPUs' of one GPU's. Any answer that
differs from the bisection is a FAIL. Runs on the GPU machine; standard
library only. Results: bench/results/zoo-h200.txt.

The truths are computed once and kept with their conditions in
bench/zoo-truth.json (device time is scarce): --truth computes the missing
ones (and only those), each from its own fresh processes. A truth may give
a "band": sizes its repeats saw both run and fail; an answer batchfit
reported as flaky within it is "flaky", not a FAIL.

    python3 bench/zoo.py --batchfit .device/batchfit --out OUT [--truth] \\
        [--workloads simclr,lm] [--conditions 24GiB,card] [--modes fresh,preload,gpus2] [--gpu N]

--modes none computes truths only. --gpu N runs everything on GPU N (two
zoo processes can share a machine of two GPUs, one GPU each; gpus2 needs
both and is left out then).

The 24 GiB condition caps the allocator only (--memory-limit-scope
allocator), as the bisection's PYTORCH_CUDA_ALLOC_CONF /
XLA_PYTHON_CLIENT_MEM_FRACTION does, so that the two compare. Modes: fresh
(--no-preload), preload (the default), gpus2 (--gpus 0,1, when two GPUs are
visible). Writes OUT/zoo.json (every record) and OUT/table.txt.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRUTH = os.path.join(HERE, "zoo-truth.json")
GIB = 2**30

# name: (command with {}, steps for batchfit, the bare command's own stop
# for the bisection, the bisection's first size)
WORKLOADS = {
    "simclr": (["examples/simclr_resnet50/train.py", "--batch-size", "{}"], 2, ["--steps", "2"], 128),
    "lm": (["examples/transformer_lm/train.py", "--batch-size", "{}"], 2, ["--steps", "2"], 8),
    "jax": (["examples/jax_optax/train.py", "--batch-size", "{}"], 3, ["--steps", "3"], 256),
    "hf": (["examples/hf_trainer/train.py", "--output_dir", "/tmp/zoo-hf", "--per_device_train_batch_size", "{}",
            "--bf16", "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true"], 3,
           ["--max_steps", "3"], 64),
    "lightning": (["examples/lightning_resnet/train.py", "fit", "--data.batch_size", "{}", "--trainer.precision",
                   "16-mixed", "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
                   "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false"], 3,
                  ["--trainer.max_steps", "3"], 1024),
}
MODES = {"fresh": ["--no-preload"], "preload": [], "gpus2": ["--gpus", "0,1"]}
# Each mode's time is a ratio of this mode's: preloading against fresh
# processes, two GPUs against one (both preloading).
RATIO_OF = {"preload": "fresh", "gpus2": "preload"}


def nvml_total_bytes():
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) * 2**20


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    except OSError:
        return 0
    return len([line for line in out.splitlines() if line.startswith("GPU ")])


def load_truth():
    try:
        with open(TRUTH) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def compute_truth(name, cond, out, gpu):
    prog, _, stop, start = WORKLOADS[name]
    cmd = [sys.executable, os.path.join(HERE, "fresh_bisect.py"), "--json", os.path.join(out, f"truth-{name}-{cond}.json"),
           "--start", str(start), "--timeout", "600"]
    if cond != "card":
        fraction = int(cond[:-3]) * GIB / nvml_total_bytes()
        cmd += ["--env", f"PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:{fraction}",
                "--env", f"XLA_PYTHON_CLIENT_MEM_FRACTION={fraction}", "--unset", "XLA_CLIENT_MEM_FRACTION"]
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    start_t = time.monotonic()
    subprocess.run(cmd + ["--", sys.executable] + prog + stop, check=True, env=env)
    with open(os.path.join(out, f"truth-{name}-{cond}.json")) as f:
        r = json.load(f)
    return {"answer": r["answer"], "trials": len(r.get("trials", [])), "seconds": round(time.monotonic() - start_t, 1),
            "conditions": f"fresh_bisect.py --start {start}, {' '.join(stop)}, "
                          f"{'no limit' if cond == 'card' else cond + ' as a memory fraction of NVML total'}",
            "measured": time.strftime("%Y-%m-%d")}


def run_batchfit(bf, name, cond, mode, out, gpu):
    prog, steps, _, _ = WORKLOADS[name]
    cmd = [bf, "search", "--no-db", "--json", "--steps", str(steps), "--log-dir", os.path.join(out, f"logs-{name}-{cond}-{mode}")]
    if gpu is not None:
        cmd += ["--gpus", str(gpu)]
    env = dict(os.environ)
    if cond != "card":
        cmd += ["--memory-limit", cond, "--memory-limit-scope", "allocator"]
        # The truth's fraction gives XLA the whole limit as its pool; a
        # program that sets none gets jaxlib's 75 % of the named card
        # (adapter.JAXDefaultFraction), a smaller pool and another answer.
        # 1.0 of the named card is the truth's pool.
        env.pop("XLA_CLIENT_MEM_FRACTION", None)
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "1.0"
    cmd += MODES[mode] + ["--", sys.executable] + prog
    p = run_child(cmd, env)
    with open(os.path.join(out, f"{name}-{cond}-{mode}.err"), "w") as f:
        f.write(p.stderr)
    with open(os.path.join(out, f"{name}-{cond}-{mode}.json"), "w") as f:
        f.write(p.stdout)
    try:
        doc = json.loads(p.stdout)
        run = (doc.get("runs") or [None])[0] or {}
    except ValueError:
        run = {}
    trials = run.get("trials") or []
    # The search's trials end with the last that moved the bracket; what
    # follows re-checks the proof pair, as every strategy must.
    search = max((i + 1 for i, t in enumerate(trials) if t.get("phase") in ("bracket", "refine")), default=0)
    return {"exit": p.returncode, "answer": run.get("answer"), "trials": len(trials), "search": search,
            "seconds": run.get("seconds"), "forked": sum(1 for t in run.get("trials") or [] if t.get("forked")),
            "flaky": bool(run.get("flaky")), "record": run}


def run_child(cmd, env=None):
    """subprocess.run(cmd, capture_output=True, text=True, env=env), except that a
    SIGTERM to this bench (timeout's, at the end of a stage) goes to the
    child too, and the bench waits for it: batchfit stops its trials before
    it exits, and the next stage must not find their GPU memory still held
    (batchfit refuses a busy GPU)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def stop(signum, frame):
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
        sys.exit(128 + signum)

    old = signal.signal(signal.SIGTERM, stop)
    try:
        out, err = p.communicate()
    finally:
        signal.signal(signal.SIGTERM, old)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def judge(truth, r):
    """ok when batchfit's answer is the bisection's; "flaky" when it is not
    but batchfit said the boundary does not reproduce and its answer lies in
    the band of sizes the truth's repeats saw both run and fail (XLA's
    autotuning, say); else FAIL, said to be "not monotone" when batchfit's
    first failure lies below the size the bisection saw run (both are
    boundaries of a program that fails below a size it runs at: the LM and
    JAX on the whole card, bench/results/not-monotone-h200.txt)."""
    want = truth.get("answer")
    if want is None:
        return "no truth"
    if r["answer"] == want:
        return "ok"
    band = truth.get("band")
    if r["flaky"] and band and band[0] - 1 <= (r["answer"] or 0) <= band[1]:
        return "flaky"
    first = (r.get("record") or {}).get("first_failure")
    if r["answer"] and first and first <= want:
        return f"FAIL (not monotone: {first} failed, {want} ran)"
    return "FAIL"


def peak_lines(out, rows):
    """For each workload and condition run fresh and preloaded: the largest
    difference between a fresh and a forked trial's peaks at the same size
    (forked trials must equal fresh ones)."""
    lines = []
    for name, cond in sorted({(r["workload"], r["condition"]) for r in rows}):
        runs = {}
        for mode in ("fresh", "preload"):
            try:
                runs[mode] = (json.load(open(os.path.join(out, f"{name}-{cond}-{mode}.json")))["runs"] or [{}])[0]
            except (OSError, ValueError, KeyError):
                pass
        if len(runs) < 2:
            continue
        fresh = {t["batch_size"]: t for t in runs["fresh"].get("trials") or [] if t["outcome"] == "ok"}
        worst, sizes = {"peak_allocated_bytes": 0, "peak_reserved_bytes": 0, "peak_device_bytes": 0}, []
        for t in runs["preload"].get("trials") or []:
            f = fresh.get(t["batch_size"])
            if not t.get("forked") or t["outcome"] != "ok" or f is None:
                continue
            sizes.append(t["batch_size"])
            for k in worst:
                worst[k] = max(worst[k], abs((f.get(k) or 0) - (t.get(k) or 0)))
        if sizes:
            lines.append(f"{name} {cond}: forked vs fresh at {sorted(set(sizes))}: largest difference "
                         + ", ".join(f"{k.split('_')[1]} {v / 2**20:.1f} MiB" for k, v in worst.items()))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batchfit", default="batchfit")
    ap.add_argument("--out", required=True)
    ap.add_argument("--truth", action="store_true", help="compute the missing truths (fresh-process bisection)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--conditions", default="24GiB,card")
    ap.add_argument("--modes", default="fresh,preload,gpus2", help="none: compute truths only")
    ap.add_argument("--gpu", type=int, help="run on this GPU alone")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    truth = load_truth()
    modes = [m for m in a.modes.split(",") if m in MODES and (m != "gpus2" or (gpu_count() >= 2 and a.gpu is None))]
    rows, failures = [], 0
    for name in a.workloads.split(","):
        for cond in a.conditions.split(","):
            key = f"{name}/{cond}"
            if key not in truth and a.truth:
                truth[key] = compute_truth(name, cond, a.out, a.gpu)
                merged = load_truth()  # another zoo process (--gpu) may have added some
                merged[key] = truth[key]
                with open(TRUTH, "w") as f:
                    json.dump(merged, f, indent=2, sort_keys=True)
                    f.write("\n")
            want = (truth.get(key) or {}).get("answer")
            seconds = {}
            for mode in modes:
                r = run_batchfit(a.batchfit, name, cond, mode, a.out, a.gpu)
                seconds[mode] = r["seconds"]
                verdict = judge(truth.get(key) or {}, r)
                failures += verdict.startswith("FAIL")
                base = seconds.get(RATIO_OF.get(mode))
                ratio = r["seconds"] / base if base and r["seconds"] else None
                rows.append(dict(workload=name, condition=cond, mode=mode, truth=want, **{k: v for k, v in r.items() if k != "record"},
                                 ratio=ratio, verdict=verdict))
                with open(os.path.join(a.out, "zoo.json"), "w") as f:
                    json.dump(rows, f, indent=1)
    lines = [f"{'workload':10} {'condition':9} {'mode':8} {'truth':>6} {'answer':>6} {'search':>6} {'trials':>6} {'forked':>6} "
             f"{'seconds':>8} {'ratio':>6}  verdict"]
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else "-"
        lines.append(f"{r['workload']:10} {r['condition']:9} {r['mode']:8} {str(r['truth']):>6} {str(r['answer']):>6} "
                     f"{r['search']:>6} {r['trials']:>6} {r['forked']:>6} {r['seconds'] or 0:>8.1f} {ratio:>6}  {r['verdict']}"
                     f"{' (flaky)' if r['flaky'] else ''}")
    lines.append("search: trials until the bracket closed; trials: all, with the proof's re-checks (the answer twice, "
                 "answer+1 failing twice alike or 4 times)")
    for mode in modes:
        for col in ("search", "trials"):
            ts = [r[col] for r in rows if r["mode"] == mode and r["answer"]]
            if ts:
                lines.append(f"{mode}: {col} max {max(ts)}, mean {sum(ts) / len(ts):.1f} (targets: at most 6 each, 5 on average)")
    lines += peak_lines(a.out, rows)
    ratios = [r["ratio"] for r in rows if r["mode"] == "gpus2" and r["ratio"]]
    if ratios:
        lines.append(f"gpus2 / one GPU: max {max(ratios):.2f}, mean {sum(ratios) / len(ratios):.2f} (targets: at most 1, 0.65 on average)")
    lines.append(f"{failures} answer(s) differ from the bisection")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "table.txt"), "w") as f:
        f.write(text + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
