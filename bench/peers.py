"""batchfit against the batch-size finders people use instead, on the same
workloads and the same card: Lightning's BatchSizeFinder (Tuner.scale_batch_size,
mode "binsearch"), the HF Trainer's auto_find_batch_size and Accelerate's
find_executable_batch_size. For each, the answer, its error against the
truth on a real card, the wall time, and that time as a ratio of batchfit's.

    python3 bench/peers.py --batchfit .device/batchfit --out /tmp/peers \\
        [--card 24GiB] [--workloads simclr,hf,lightning] [--peers lightning,accelerate,hf] \\
        [--check] [--gpu N] [--dry-run]

The card is real for every peer: a process of this script holds all but
--card of the GPU through the CUDA driver API (bench/card_check.py's Holder)
while each peer runs in a fresh process of its own (`peers.py run-PEER
--workload W`, which prints its answer on a line of its own), timed from the
start of its process to its answer. batchfit runs while nothing is held, with
`search --no-db --memory-limit CARD --json` and its defaults otherwise: it
caps and holds the card itself, and its held proof needs the GPU otherwise
idle.

Workloads (each one program, which batchfit searches and the truth is of):
  simclr     the SimCLR ResNet-50 step as a LightningModule
             (bench/workloads/simclr_lightning.py); peers lightning, accelerate
  hf         examples/hf_trainer (the HF Trainer on a small Llama); peer hf,
             auto_find_batch_size from --per_device_train_batch_size --hf-start
  lightning  examples/lightning_resnet (LightningCLI); peer lightning, on the
             example's own module and data module; accelerate on request
Every tool runs 3 optimizer steps at each size, batchfit's default: the
programs stop after 3 (--steps 3, --max_steps 3, --trainer.max_steps 3),
Lightning's tuner runs steps_per_trial=3, and Accelerate's decorated function
fits 3 steps. The peers keep their own defaults otherwise (Lightning's
init_val 2, max_trials 25 and, where the installed version has one, its
margin; Accelerate's and HF's factor per out-of-memory error), and report
what a user of them gets.

The truth is the largest size the program runs at, plainly, on the real
card: the one kept in bench/zoo-truth.json as WORKLOAD/real-CARD, or with
--check the one these runs find: each answer and the size above run plainly
on the held card (bench/card_check.py's runs), the bracket then bisected
until a size that runs lies next to one that runs out of memory. The table's
last column names the source. Prints `workload tool answer truth error
trials seconds vs-batchfit truth-from`, then batchfit's time against each
peer's where there is a target, and every tool's trials; exits 1 when
batchfit's answer is not the truth. Writes OUT/peers.json and OUT/table.txt,
and every process's output under OUT.
"""

import argparse
import dataclasses
import functools
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import card_check  # noqa: E402  (standard library only; CUDA is touched by Holder alone)

TRUTH = os.path.join(HERE, "zoo-truth.json")
GIB = 2**30
STEPS = 3
# A peer runner prints its result as this prefix and a JSON object, on a line of its own.
ANSWER_PREFIX = "peers-answer "
T0_ENV = "PEERS_T0"


@dataclasses.dataclass(frozen=True)
class Workload:
    program: tuple[str, ...]  # argv after the interpreter, "{}" for the batch size
    peers: tuple[str, ...]  # the peers run by default
    can_run: tuple[str, ...]  # the peers that know how to search it
    truth_key: str  # its truths in zoo-truth.json: TRUTH_KEY/real-CARD
    accelerate_start: int = 0


def workloads(out: str) -> dict[str, Workload]:
    """The workloads, their files written under out. The hf and lightning
    commands are bench/gpu_held.sh's, whose real-card checks gave the truths
    kept in zoo-truth.json."""
    return {
        "simclr": Workload(("bench/workloads/simclr_lightning.py", "--batch-size", "{}", "--steps", str(STEPS)),
                           ("lightning", "accelerate"), ("lightning", "accelerate"), "simclr-lightning", 4096),
        "hf": Workload(("examples/hf_trainer/train.py", "--output_dir", os.path.join(out, "hf-output"),
                        "--per_device_train_batch_size", "{}", "--bf16", "--report_to", "none", "--save_strategy", "no",
                        "--disable_tqdm", "true", "--max_steps", str(STEPS)), ("hf",), ("hf",), "hf"),
        "lightning": Workload(("examples/lightning_resnet/train.py", "fit", "--data.batch_size", "{}",
                               "--trainer.max_steps", str(STEPS), "--trainer.precision", "16-mixed",
                               "--trainer.logger", "false", "--trainer.enable_checkpointing", "false"),
                              ("lightning",), ("lightning", "accelerate"), "lightning", 16384),
    }


PEER_NAMES = {
    "batchfit": "batchfit",
    "lightning": "lightning binsearch",
    "accelerate": "accelerate",
    "hf": "hf auto_find",
}
# The goals batchfit is held to: its wall as a fraction of the peer's, at
# most, with an exact answer.
TARGETS = {("simclr", "lightning"): 0.7, ("hf", "hf"): 1.0}


# ---------------------------------------------------------------- the peers
# Each runs in a process of its own with the held card, imports its
# framework itself, and prints ANSWER_PREFIX + JSON once it has an answer.


def since_start() -> float:
    """Seconds since the parent started this process (T0_ENV), or since
    this process started when run by hand."""
    t0 = os.environ.get(T0_ENV)
    return time.time() - float(t0) if t0 else time.time() - _IMPORTED


_IMPORTED = time.time()


def report(tool: str, answer: int | None, trials: list, **extra) -> None:
    doc = {"tool": tool, "answer": answer, "seconds": round(since_start(), 2), "trials": trials, **extra}
    print(ANSWER_PREFIX + json.dumps(doc), flush=True)


@functools.cache
def load(path: str, name: str):
    """A module from a file of this repository, by its path (once)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lightning_parts(workload: str, batch_size: int, root: str):
    """The Trainer, the module and the data module (or None) of a Lightning
    workload at batch_size, as its plain run builds them."""
    import lightning as L

    L.seed_everything(0)
    if workload == "simclr":
        mod = load("bench/workloads/simclr_lightning.py", "simclr_lightning")
        return mod.make_trainer(STEPS, root), mod.SimCLRModule(batch_size=batch_size), None
    ex = load("examples/lightning_resnet/train.py", "lightning_example")
    # LightningCLI's Trainer given the program's flags; the rest its defaults.
    trainer = L.Trainer(max_steps=STEPS, precision="16-mixed", logger=False, enable_checkpointing=False,
                        default_root_dir=root)
    return trainer, ex.ResNetClassifier(), ex.RandomImageData(batch_size=batch_size)


def run_lightning(a) -> None:
    """Tuner.scale_batch_size(mode="binsearch"): doubles from init_val until a
    size runs out of memory, then bisects, every trial steps_per_trial steps
    in this one process; where the version has a margin, the answer is the
    largest size that ran less that margin."""
    import inspect

    from lightning.pytorch.callbacks import BatchSizeFinder
    from lightning.pytorch.tuner import Tuner
    from lightning.pytorch.tuner import batch_size_scaling

    trainer, model, data = lightning_parts(a.workload, a.init, a.out)
    holder = data if data is not None else model
    trials = []
    run = getattr(batch_size_scaling, "_try_loop_run", None)

    # The tuner says how each trial ended only in its log, so its helper
    # that runs one trial is watched (a private name: where a version lacks
    # it, the trials are not listed).
    def watched(*args, **kwargs):
        trials.append([holder.batch_size, "oom"])
        out = run(*args, **kwargs)
        trials[-1][1] = "ok"
        return out

    if run is not None:
        batch_size_scaling._try_loop_run = watched
    defaults = {**{k: v.default for k, v in inspect.signature(BatchSizeFinder.__init__).parameters.items()},
                **{k: v.default for k, v in inspect.signature(Tuner.scale_batch_size).parameters.items()}}
    kwargs = dict(mode="binsearch", steps_per_trial=STEPS, init_val=a.init)
    if data is not None:
        kwargs["datamodule"] = data
    answer = Tuner(trainer).scale_batch_size(model, **kwargs)
    ran = [s for s, o in trials if o == "ok"]
    report("lightning", answer, trials, largest_ran=max(ran) if ran else None, margin=defaults.get("margin"),
           init_val=a.init, max_trials=defaults.get("max_trials"), max_val=defaults.get("max_val"))


def run_accelerate(a) -> None:
    """find_executable_batch_size from --start: a fresh module and Trainer fit
    STEPS steps at each size in this one process, the size cut on every
    out-of-memory error by Accelerate's own factor."""
    from accelerate.utils import find_executable_batch_size

    trials = []

    @find_executable_batch_size(starting_batch_size=a.start)
    def fit(batch_size):
        trials.append([batch_size, "oom"])
        trainer, model, data = lightning_parts(a.workload, batch_size, a.out)
        if data is not None:
            trainer.fit(model, datamodule=data)
        else:
            trainer.fit(model)
        trials[-1][1] = "ok"
        return batch_size

    answer = fit()
    report("accelerate", answer, trials, start=a.start)


def run_hf(a) -> None:
    """The HF example itself with --auto_find_batch_size, from
    --per_device_train_batch_size --start: the Trainer retries its inner
    training loop (STEPS steps) with a smaller size on each out-of-memory
    error, in this one process. The answer is the size it trained at."""
    ex = load("examples/hf_trainer/train.py", "hf_example")
    trials = []

    class Recording(ex.Trainer):
        def _inner_training_loop(self, batch_size=None, *args, **kwargs):
            trials.append([batch_size, "oom"])
            out = super()._inner_training_loop(batch_size, *args, **kwargs)
            trials[-1][1] = "ok"
            return out

        def train(self, *args, **kwargs):
            out = super().train(*args, **kwargs)
            state = getattr(self.state, "train_batch_size", None)
            report("hf", state or self._train_batch_size, trials, start=a.start)
            return out

    ex.Trainer = Recording
    argv = [arg.replace("{}", str(a.start)) for arg in workloads(a.out)["hf"].program[1:]]
    sys.argv = [ex.__file__] + argv + ["--auto_find_batch_size", "true"]
    ex.main()


def hold(a) -> None:
    """Holds all but --card of the GPU until stdin closes (the parent ends,
    or is done with the card)."""
    held = card_check.Holder(a.gpu, card_check.size_of(a.card))
    print(f"held: {held.free / GIB:.3f} GiB free of {held.total / GIB:.2f} GiB on gpu {a.gpu}", flush=True)
    sys.stdin.read()


RUNNERS = {"run-lightning": run_lightning, "run-accelerate": run_accelerate, "run-hf": run_hf, "hold": hold}


def runner_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog=f"peers.py {argv[0]}")
    p.add_argument("--workload", choices=sorted(workloads("")))
    p.add_argument("--out", default="/tmp/peers", help="where the runs write their files")
    p.add_argument("--init", type=int, default=2, help="Lightning's init_val")
    p.add_argument("--start", type=int, default=64, help="the first size Accelerate or HF tries")
    p.add_argument("--card", default="24GiB")
    p.add_argument("--gpu", type=int, default=0)
    a = p.parse_args(argv[1:])
    if argv[0] != "hold" and not a.workload:
        p.error("give --workload")
    RUNNERS[argv[0]](a)
    return 0


# ------------------------------------------------------- the comparison


@dataclasses.dataclass
class Result:
    workload: str
    tool: str
    answer: int | None = None
    seconds: float | None = None
    trials: int | None = None
    detail: str = ""
    exit: int | None = None
    log: str = ""


def parse_answer(text: str) -> dict | None:
    """The last answer line a peer runner printed, or None."""
    doc = None
    for line in text.splitlines():
        if line.startswith(ANSWER_PREFIX):
            try:
                doc = json.loads(line[len(ANSWER_PREFIX):])
            except ValueError:
                pass
    return doc


def parse_batchfit(text: str) -> dict:
    """A batchfit --json document's first run, or {}."""
    try:
        return ((json.loads(text).get("runs") or [None])[0]) or {}
    except (ValueError, AttributeError):
        return {}


def trial_line(trials: list) -> str:
    """Sizes in order, x for out of memory (record_line.py's notation)."""
    return " ".join(f"{s}{'' if o == 'ok' else 'x'}" for s, o in trials)


def run_process(cmd: list[str], env: dict, timeout: float, log: str) -> tuple[int | None, str, float]:
    """Runs cmd in a process group of its own, its output into log; on
    timeout or on this bench's own SIGTERM the group gets SIGTERM, then
    SIGKILL (batchfit stops its trials on SIGTERM)."""
    start = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=f, text=True, start_new_session=True,
                             cwd=ROOT)

        def stop(*_):
            for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
                try:
                    os.killpg(p.pid, sig)
                    p.wait(timeout=wait)
                    return
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass

        old = signal.signal(signal.SIGTERM, lambda *_: (stop(), sys.exit(143)))
        try:
            out, _ = p.communicate(timeout=timeout)
            code = p.returncode
        except subprocess.TimeoutExpired:
            stop()
            out, code = p.stdout.read() if p.stdout else "", None
        except BaseException:
            stop()
            raise
        finally:
            signal.signal(signal.SIGTERM, old)
        f.write("\n--- stdout ---\n" + (out or ""))
    return code, out or "", time.monotonic() - start


class HeldCard:
    """All but the card's memory of the GPU, held by a child process
    (`peers.py hold`) for as long as the with-block runs."""

    def __init__(self, card: str, gpu: int, log: str):
        self.cmd = [sys.executable, os.path.abspath(__file__), "hold", "--card", card, "--gpu", str(gpu)]
        self.log = log

    def __enter__(self):
        self.err = open(self.log, "w")
        self.p = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("held:"):
            self.p.wait()
            self.err.close()
            raise SystemExit(f"peers: error: the card could not be held (see {self.log})")
        self.line = line.strip()
        return self

    def __exit__(self, *exc):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.err.close()


def batchfit_cmd(a, name: str, w: Workload) -> list[str]:
    cmd = [a.batchfit, "search", "--no-db", "--memory-limit", a.card, "--json",
           "--log-dir", os.path.join(a.out, f"logs-{name}-batchfit")]
    if a.gpu is not None:
        cmd += ["--gpus", str(a.gpu)]
    return cmd + ["--", sys.executable, *w.program]


def peer_cmd(a, name: str, w: Workload, peer: str) -> list[str]:
    cmd = [sys.executable, os.path.abspath(__file__), f"run-{peer}", "--workload", name, "--out", a.out]
    if peer == "lightning":
        cmd += ["--init", str(a.lightning_init)]
    elif peer == "accelerate":
        cmd += ["--start", str(a.accelerate_start or w.accelerate_start)]
    elif peer == "hf":
        cmd += ["--start", str(a.hf_start)]
    return cmd


def program_cmd(w: Workload) -> list[str]:
    return [sys.executable, *w.program]


def run_batchfit(a, name: str, w: Workload) -> Result:
    log = os.path.join(a.out, f"{name}-batchfit.err")
    code, out, secs = run_process(batchfit_cmd(a, name, w), dict(os.environ), a.timeout, log)
    with open(os.path.join(a.out, f"{name}-batchfit.json"), "w") as f:
        f.write(out)
    run = parse_batchfit(out)
    trials = run.get("trials") or []
    seq = trial_line([(t.get("batch_size"), "ok" if t.get("outcome") == "ok" else "oom") for t in trials])
    detail = f"proof {run.get('proof') or '-'}; its own seconds {run.get('seconds')}; {seq}"
    if code != 0:
        detail = f"exit {code}; " + detail
    return Result(name, "batchfit", run.get("answer"), round(secs, 1), len(trials), detail, code, log)


def run_peer(a, name: str, w: Workload, peer: str, env: dict) -> Result:
    log = os.path.join(a.out, f"{name}-{peer}.log")
    code, out, secs = run_process(peer_cmd(a, name, w, peer), dict(env, **{T0_ENV: repr(time.time())}), a.timeout, log)
    doc = parse_answer(out)
    if doc is None:
        why = "timed out" if code is None else f"exit {code}"
        return Result(name, peer, None, round(secs, 1), None, f"no answer ({why}; see {log})", code, log)
    trials = doc.get("trials") or []
    extra = {k: v for k, v in doc.items() if k not in ("tool", "answer", "seconds", "trials") and v is not None}
    detail = "; ".join([f"{k} {v}" for k, v in extra.items()] + [trial_line(trials) or "trials not seen"])
    if code != 0:
        detail = f"exit {code} after its answer; " + detail
    return Result(name, peer, doc.get("answer"), doc.get("seconds"), len(trials) or None, detail, code, log)


def boundary(outcomes: dict[int, str]) -> tuple[int | None, tuple[int, int] | None, str]:
    """From plain runs' outcomes (size: ok, oom, crash or timeout): the
    truth where a size that ran lies next to one that ran out of memory,
    else the bracket still open (largest that ran, smallest that failed)
    and why there is no truth."""
    ran = [s for s, o in outcomes.items() if o == "ok"]
    oom = [s for s, o in outcomes.items() if o == "oom"]
    odd = sorted(s for s, o in outcomes.items() if o not in ("ok", "oom"))
    if odd:
        return None, None, f"{', '.join(f'{s} {outcomes[s]}' for s in odd)}: no boundary"
    if not ran or not oom:
        return None, None, "no size ran" if not ran else f"every size ran, up to {max(ran)}"
    lo, hi = max(ran), min(oom)
    if lo > hi:
        return None, None, f"not monotone: {hi} out of memory, {lo} ran"
    if hi == lo + 1:
        return lo, None, ""
    return None, (lo, hi), "open"


def check(a, w: Workload, answers: list[int], env: dict, runs: list) -> tuple[int | None, str]:
    """Each answer and the size above, run plainly on the held card, then
    the bracket bisected (at most a.check_bisect more runs)."""
    outcomes: dict[int, str] = {}

    def plain(size: int) -> None:
        if size in outcomes:
            return
        outcome, secs, tail = card_check.run(program_cmd(w), size, env, a.timeout)
        outcomes[size] = outcome
        runs.append({"size": size, "outcome": outcome, "seconds": round(secs, 1)})
        print(f"peers: check {size} {outcome} {secs:.1f}s", file=sys.stderr, flush=True)
        if tail:
            print(tail, file=sys.stderr)

    for n in answers:
        plain(n)
        plain(n + 1)
    for _ in range(a.check_bisect):
        truth, bracket, why = boundary(outcomes)
        if bracket is None:
            break
        plain((bracket[0] + bracket[1]) // 2)
    truth, _, why = boundary(outcomes)
    seen = ", ".join(f"{s} {'ran' if o == 'ok' else o}" for s, o in sorted(outcomes.items()))
    return truth, (f"checked here: {seen}" if truth else f"checked here, no truth ({why}): {seen}")


def stored_truth(doc: dict, w: Workload, card: str) -> tuple[int | None, str]:
    key = f"{w.truth_key}/real-{card}"
    t = doc.get(key) or {}
    if t.get("answer") is None:
        return None, f"none in zoo-truth.json ({key}; --check finds one)"
    return t["answer"], f"zoo-truth.json {key}"


def error(answer: int | None, truth: int | None) -> str:
    if answer is None:
        return "no answer"
    if truth is None:
        return "?"
    if answer == truth:
        return "exact"
    return f"{(answer - truth) / truth * 100:+.1f} %"


def table(results: list[Result], truths: dict[str, tuple[int | None, str]]) -> list[str]:
    head = (f"{'workload':10} {'tool':20} {'answer':>6} {'truth':>6} {'error':>9} {'trials':>6} {'seconds':>8} "
            f"{'vs batchfit':>11}  truth from")
    lines = [head]
    base = {r.workload: r.seconds for r in results if r.tool == "batchfit"}
    for r in results:
        truth, source = truths.get(r.workload, (None, "-"))
        b = base.get(r.workload)
        ratio = f"{r.seconds / b:.2f}" if r.seconds and b else "-"
        lines.append(f"{r.workload:10} {PEER_NAMES[r.tool]:20} {str(r.answer if r.answer is not None else '-'):>6} "
                     f"{str(truth if truth is not None else '-'):>6} {error(r.answer, truth):>9} "
                     f"{str(r.trials if r.trials is not None else '-'):>6} "
                     f"{(f'{r.seconds:.1f}' if r.seconds is not None else '-'):>8} {ratio:>11}  {source}")
    return lines


def target_lines(results: list[Result], truths: dict) -> list[str]:
    lines = []
    by = {(r.workload, r.tool): r for r in results}
    for (name, peer), most in TARGETS.items():
        bf, other = by.get((name, "batchfit")), by.get((name, peer))
        if not bf or not other:
            continue
        truth = truths.get(name, (None, ""))[0]
        exact = bf.answer is not None and bf.answer == truth
        if bf.seconds and other.seconds:
            r = bf.seconds / other.seconds
            lines.append(f"{name}: batchfit's wall / {PEER_NAMES[peer]}'s {r:.2f} (target at most {most}: "
                         f"{'met' if r <= most else 'NOT met'}); batchfit {error(bf.answer, truth)}")
        else:
            lines.append(f"{name}: no wall ratio (batchfit {bf.seconds}, {PEER_NAMES[peer]} {other.seconds}); "
                         f"batchfit {'exact' if exact else error(bf.answer, truth)}")
    return lines


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="peers.py run-lightning|run-accelerate|run-hf --workload W: one peer alone")
    p.add_argument("--batchfit", default="batchfit", help="the batchfit binary")
    p.add_argument("--out", default="/tmp/peers", help="every run's output, peers.json and table.txt")
    p.add_argument("--card", default="24GiB", help="the real card: all but this much of the GPU is held for the peers")
    p.add_argument("--workloads", default="simclr,hf,lightning")
    p.add_argument("--peers", help="peers to run on each workload that they can search (default: each workload's own)")
    p.add_argument("--check", action="store_true", help="find the truth by plain runs on the held card")
    p.add_argument("--check-bisect", type=int, default=8,
                   help="plain runs at most, past the answers, to close a bracket")
    p.add_argument("--gpu", type=int, help="the GPU (default 0; batchfit is then given --gpus N)")
    p.add_argument("--timeout", type=float, default=600, help="seconds for each process")
    p.add_argument("--lightning-init", type=int, default=2, help="Lightning's init_val (its default)")
    p.add_argument("--hf-start", type=int, default=64, help="HF's first --per_device_train_batch_size")
    p.add_argument("--accelerate-start", type=int,
                   help="Accelerate's starting_batch_size (default: 4096 simclr, 16384 lightning)")
    p.add_argument("--dry-run", action="store_true", help="print the commands and run nothing")
    a = p.parse_args(argv)
    card_check.size_of(a.card)
    a.out = os.path.abspath(a.out)
    known = workloads(a.out)
    names = [n for n in a.workloads.split(",") if n]
    for n in names:
        if n not in known:
            p.error(f"unknown workload {n!r}: give some of {', '.join(known)}")
    a.names = names
    a.peer_list = None
    if a.peers:
        a.peer_list = [x for x in a.peers.split(",") if x]
        for x in a.peer_list:
            if x not in PEER_NAMES or x == "batchfit":
                p.error(f"unknown peer {x!r}: give some of lightning, accelerate, hf")
    return a


def peers_of(a, w: Workload) -> list[str]:
    return [x for x in a.peer_list if x in w.can_run] if a.peer_list else list(w.peers)


def dry_run(a, known: dict[str, Workload]) -> None:
    gpu = a.gpu if a.gpu is not None else 0
    for name in a.names:
        w = known[name]
        print(f"# {name}")
        print(shlex.join(batchfit_cmd(a, name, w)))
        print(f"# then, while {shlex.join(HeldCard(a.card, gpu, '').cmd)} holds all but {a.card} of gpu {gpu}:")
        for peer in peers_of(a, w):
            print(f"CUDA_VISIBLE_DEVICES={gpu} {shlex.join(peer_cmd(a, name, w, peer))}")
        if a.check:
            print(f"# plain runs at each answer and the size above ({{}}), bisected up to {a.check_bisect} more:")
            print(f"CUDA_VISIBLE_DEVICES={gpu} {shlex.join(program_cmd(w))}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in RUNNERS:
        return runner_main(argv)
    a = parse_args(argv)
    known = workloads(a.out)
    # The programs' paths are the repository's; a binary named by a path is the caller's.
    if os.sep in a.batchfit:
        a.batchfit = os.path.abspath(a.batchfit)
    os.chdir(ROOT)
    if a.dry_run:
        dry_run(a, known)
        return 0
    os.makedirs(a.out, exist_ok=True)
    gpu = a.gpu if a.gpu is not None else 0
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu))
    try:
        with open(TRUTH) as f:
            truth_doc = json.load(f)
    except FileNotFoundError:
        truth_doc = {}
    results: list[Result] = []
    truths: dict[str, tuple[int | None, str]] = {}
    record = {"card": a.card, "steps": STEPS, "workloads": {}}
    for name in a.names:
        w = known[name]
        print(f"peers: {name}: batchfit", file=sys.stderr, flush=True)
        mine = [run_batchfit(a, name, w)]
        checks: list = []
        with HeldCard(a.card, gpu, os.path.join(a.out, f"{name}-hold.err")) as held:
            print(f"peers: {name}: {held.line}", file=sys.stderr, flush=True)
            for peer in peers_of(a, w):
                print(f"peers: {name}: {peer}", file=sys.stderr, flush=True)
                mine.append(run_peer(a, name, w, peer, env))
            truth = stored_truth(truth_doc, w, a.card)
            if a.check:
                answers = sorted({r.answer for r in mine if r.answer})
                found = check(a, w, answers, env, checks)
                if truth[0] is not None and found[0] is not None and found[0] != truth[0]:
                    found = (found[0], f"{found[1]} (zoo-truth.json says {truth[0]})")
                if found[0] is not None and found[0] == truth[0]:
                    found = (found[0], f"{found[1]} (as zoo-truth.json)")
                truth = found if found[0] is not None or truth[0] is None else (truth[0], f"{truth[1]}; {found[1]}")
        truths[name] = truth
        results += mine
        record["workloads"][name] = {"held": held.line, "truth": truth[0], "truth_from": truth[1], "checks": checks,
                                     "results": [dataclasses.asdict(r) for r in mine]}
        with open(os.path.join(a.out, "peers.json"), "w") as f:
            json.dump(record, f, indent=1)
    lines = [f"Each peer on a real {a.card} card (all but {a.card} of gpu {gpu} held); batchfit "
             f"search --memory-limit {a.card}, holding it itself; {STEPS} steps a size for every tool."]
    lines += table(results, truths)
    lines += [f"{name}: {doc['held']} for the peers" for name, doc in record["workloads"].items()]
    lines += target_lines(results, truths)
    lines.append("trials, in order (x: out of memory):")
    lines += [f"  {r.workload} {PEER_NAMES[r.tool]}: {r.detail}" for r in results]
    wrong = [r.workload for r in results if r.tool == "batchfit" and truths[r.workload][0] is not None
             and r.answer != truths[r.workload][0]]
    lines.append(f"batchfit differs from the truth on {len(wrong)} workload(s)"
                 + (f": {', '.join(wrong)}" if wrong else ""))
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "table.txt"), "w") as f:
        f.write(text + "\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
