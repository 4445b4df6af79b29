"""batchfit's warm PyTorch worker: python -m batchfit.worker MODULE:ATTR

batchfit starts this once, it builds the Trial once (see batchfit.trial), and
then runs trials on request, resetting and verifying memory after each one.

Protocol (version 1): newline-delimited JSON over two inherited pipes whose
descriptors batchfit names in BATCHFIT_WORKER_FDS ("r,w"); stdout and stderr
stay the Trial's own.

    worker -> hello   {pid, torch, device, device_total, cuda, verify,
                       baseline_allocated, baseline_reserved, ..., packages}
             fatal    {stage, exception, traceback}   (setup failed; exits 1)
    batchfit -> trial {id, batch_size, steps}
    worker -> result  {id, outcome: ok|oom|error, exception, traceback,
                       peak_allocated, peak_reserved, step_seconds,
                       retained_bytes, allocated_after, reserved_after,
                       verified, optimizer_state_created, ...,
                       oom_request: what torch's OOM observer saw refused}
    batchfit -> exit  (the worker exits 0 at once, skipping atexit handlers;
                       so does end of input)
    anything else -> error {error, id?}

Verification: with CUDA, torch.cuda.memory_allocated() after the reset must
equal the baseline exactly (the allocator counts whole blocks, so any
difference is a live allocation). Without CUDA there are no allocator
counters; the worker compares the bytes of all tensors Python can reach
instead (see batchfit.trial.Census).

Run by hand, or by `batchfit search` without --worker, it is one fresh trial:
"--once SIZE", or BATCHFIT_BATCH_SIZE when batchfit did not hand it a channel,
builds the Trial and runs BATCHFIT_STEPS steps (default 3, also for 0) at that
size, with no warm-up, exactly as a training script would; an error ends the
process. As in any fresh trial, the adapter ends it after BATCHFIT_STEPS
optimizer steps. A --soak trial (BATCHFIT_SOAK=1) steps until batchfit's
SIGTERM at the soak's end, which the adapter answers with its report.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from typing import Any, Sequence

from batchfit._runtime import hook as _hook
from batchfit._runtime import trial as _trial
from batchfit._runtime.report import describe
from batchfit._runtime.lines import write_line

PROTOCOL_VERSION = 1
FDS_ENV = "BATCHFIT_WORKER_FDS"
WARMUP_ENV = "BATCHFIT_WORKER_WARMUP"
WARMUP_STEPS_ENV = "BATCHFIT_WORKER_WARMUP_STEPS"
DEFAULT_STEPS = 3

_USAGE = """usage: python -m batchfit.worker [--once SIZE] [--steps N] TARGET

TARGET is MODULE:ATTR (a Trial class), MODULE (setup() and step(state, batch_size)
functions) or path/to/file.py:ATTR.

batchfit runs it as a warm worker:
    batchfit search --worker -- python -m batchfit.worker mymodule:Trial
    batchfit doctor -- python -m batchfit.worker mymodule:Trial
By hand, --once SIZE runs one trial at SIZE (BATCHFIT_STEPS steps, default 3)."""


class Channel:
    """One JSON object per line over a pair of pipe descriptors."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self._r = os.fdopen(rfd, "rb", buffering=0)
        self._w = wfd
        self._buf = b""

    def recv(self) -> bytes | None:
        """The next line without its newline, or None at end of input."""
        while b"\n" not in self._buf:
            chunk = self._r.read(65536)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def send(self, msg: dict[str, Any]) -> None:
        write_line(self._w, msg)


def _log(msg: str) -> None:
    sys.stderr.write(f"batchfit.worker: {msg}\n")
    sys.stderr.flush()


class Worker:
    """The built Trial and its baseline."""

    def __init__(self, target: str, warmup: int = 1, warmup_steps: int = 1) -> None:
        started = time.perf_counter()
        self.target = target
        obj = _trial.load(target)
        self.runner = _trial.Runner(obj, name=target)
        self.warmup = warmup
        self.warmup_steps = 0
        if warmup > 0:
            self.warmup_steps = _trial.warm_up(self.runner, warmup, warmup_steps)
        self.torch = _trial.torch_module()
        self.cuda = _trial.cuda_in_use(self.torch)
        if self.cuda:
            _watch_ooms(self.torch)
        _trial.reset(self.runner, self.torch)
        self.baseline_allocated = self._allocated()
        self.baseline_reserved = self._reserved()
        self.census = _trial.Census(self.torch) if self.torch is not None else None
        self.optimizer_state = self._optimizer_state()
        self.setup_seconds = time.perf_counter() - started

    def _allocated(self) -> int:
        return int(self.torch.cuda.memory_allocated()) if self.cuda else 0

    def _reserved(self) -> int:
        return int(self.torch.cuda.memory_reserved()) if self.cuda else 0

    def _optimizer_state(self) -> tuple[int, int]:
        if self.torch is None:
            return (0, 0)
        optimizers, _, _ = _trial.find(self.runner.roots, self.torch)
        return _trial.optimizer_state(optimizers, self.torch)

    def hello(self) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "type": "hello",
            "version": PROTOCOL_VERSION,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "target": self.target,
            "torch": str(getattr(self.torch, "__version__", "")) if self.torch is not None else "",
            "cuda": self.cuda,
            "device": "cpu",
            "device_total": 0,
            "verify": "cuda_allocated" if self.cuda else "python_tensors",
            "baseline_allocated": self.baseline_allocated,
            "baseline_reserved": self.baseline_reserved,
            "baseline_tensor_bytes": self.census.bytes if self.census is not None else 0,
            "warmup_size": self.warmup,
            "warmup_steps": self.warmup_steps,
            "optimizers": len(_trial.find(self.runner.roots, self.torch)[0]) if self.torch is not None else 0,
            "optimizer_state_bytes": self.optimizer_state[1],
            "setup_seconds": self.setup_seconds,
            # What a fork server needs to preload for this trial's fresh
            # processes (the answer's confirmation): batchfit starts one
            # while this worker searches.
            "packages": _packages(),
        }
        if self.cuda:
            cuda = self.torch.cuda
            index = cuda.current_device()
            msg["device"] = str(cuda.get_device_name(index))
            msg["device_total"] = int(cuda.get_device_properties(index).total_memory)
        return msg

    def trial(self, id_: int, batch_size: int, steps: int) -> dict[str, Any]:
        started = time.perf_counter()
        _frameworks_state().last_request = None
        failure, times = _trial.run_trial(self.runner, batch_size, steps, _trial.sync)
        # torch may have been imported by the first step.
        self.torch = torch = _trial.torch_module()
        self.cuda = _trial.cuda_in_use(torch)
        result: dict[str, Any] = {"type": "result", "id": id_, "batch_size": batch_size, "steps": steps,
                  "outcome": "ok", "step_seconds": times}
        if failure is not None:
            result["outcome"] = failure.outcome
            result["exception"] = failure.exception
            request = _frameworks_state().last_request
            if failure.outcome == "oom" and request:
                # What torch's OOM observer saw refused, with the allocator's
                # counters: how far the trial was from fitting.
                result["oom_request"] = dict(request)
            if failure.traceback:
                result["traceback"] = failure.traceback
            _log(f"trial {id_} at batch size {batch_size}: {failure.outcome}: {failure.exception}")
            if failure.traceback:
                sys.stderr.write(failure.traceback)
                sys.stderr.flush()
        del failure
        if self.cuda:
            result["peak_allocated"] = int(torch.cuda.max_memory_allocated())
            result["peak_reserved"] = int(torch.cuda.max_memory_reserved())
        else:
            result["peak_allocated"] = 0
            result["peak_reserved"] = 0
        result.update(self._reset_and_verify())
        result["seconds"] = time.perf_counter() - started
        return result

    def _reset_and_verify(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verified": False, "retained_bytes": 0, "allocated_after": 0, "reserved_after": 0,
               "optimizer_state_created": False}
        torch = self.torch
        try:
            _trial.reset(self.runner, torch)
            # A second pass for what the first one only made unreachable
            # (objects whose finalizers drop the last reference to a tensor).
            if self.cuda and self._allocated() != self.baseline_allocated:
                _trial.reset(self.runner, torch)
            entries, state_bytes = self._optimizer_state()
            out["optimizer_state_bytes"] = state_bytes
            base_entries, base_bytes = self.optimizer_state
            out["optimizer_state_created"] = entries > base_entries or state_bytes > base_bytes
            if self.cuda:
                after = self._allocated()
                out["allocated_after"] = after
                out["reserved_after"] = self._reserved()
                out["retained_bytes"] = after - self.baseline_allocated
                out["verified"] = after == self.baseline_allocated
                if after != self.baseline_allocated and self.census is not None:
                    out["retained_tensors"] = self.census.new_tensors()
            elif self.census is not None:
                retained = self.census.retained()
                out["retained_bytes"] = retained
                out["verified"] = retained == 0
                if retained != 0:
                    out["retained_tensors"] = self.census.new_tensors()
            else:
                # No torch at all: nothing to measure, nothing to leak.
                out["verified"] = True
        except Exception as e:
            # A sticky CUDA error (an illegal memory access) makes every call
            # fail from now on; the worker is no longer trustworthy.
            out["verified"] = False
            out["reset_error"] = describe(e)
            _trial.scrub(e)
        return out


def serve(channel: Channel, worker: Worker) -> int:
    """Answer requests until exit or end of input."""
    while True:
        line = channel.recv()
        if line is None:
            return 0
        try:
            msg = json.loads(line.decode("utf-8"))
        except ValueError as e:
            channel.send({"type": "error", "error": f"not a JSON object: {e}"})
            continue
        if not isinstance(msg, dict):
            channel.send({"type": "error", "error": "not a JSON object"})
            continue
        kind = msg.get("type")
        if kind == "exit":
            return 0
        if kind != "trial":
            reply = {"type": "error", "error": f"unknown message type {kind!r}"}
            if "id" in msg:
                reply["id"] = msg["id"]
            channel.send(reply)
            continue
        id_: Any = msg.get("id")
        size: Any = msg.get("batch_size")
        steps: Any = msg.get("steps", DEFAULT_STEPS)
        if not _positive(size) or not _positive(steps) or not isinstance(id_, int) or isinstance(id_, bool):
            channel.send({"type": "error", "id": id_,
                          "error": "a trial needs an integer id and positive integer batch_size and steps"})
            continue
        channel.send(worker.trial(id_, size, steps))


def _positive(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"batchfit.worker: {name}={value!r} is not an integer")


def _parse(argv: Sequence[str]) -> tuple[int | None, int | None, str]:
    once: int | None = None
    steps: int | None = None
    target: str | None = None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print(_USAGE)
            raise SystemExit(0)
        if a in ("--once", "--steps"):
            if not args:
                raise SystemExit(f"batchfit.worker: {a} needs a number\n{_USAGE}")
            v = args.pop(0)
            try:
                n = int(v)
            except ValueError:
                n = 0
            if n < 1:
                raise SystemExit(f"batchfit.worker: {a} {v}: want a positive integer")
            if a == "--once":
                once = n
            else:
                steps = n
            continue
        if a.startswith("-") or target is not None:
            raise SystemExit(f"batchfit.worker: unexpected argument {a!r}\n{_USAGE}")
        target = a
    if target is None:
        raise SystemExit(_USAGE)
    return once, steps, target


#: True while this process serves batchfit as a warm worker: many trials,
#: each handed its size in its step, none of them the process's own
#: (batchfit.batch_size() refuses then).
serving = False


def _channel_fds() -> tuple[int, int] | None:
    value = os.environ.pop(FDS_ENV, "")
    if not value:
        return None
    try:
        r, w = [int(x) for x in value.split(",")]
    except ValueError:
        raise SystemExit(f"batchfit.worker: {FDS_ENV}={value!r}: want two descriptors, r,w")
    # The Trial's own child processes (data loader workers, compilers) must
    # not hold batchfit's channel open.
    for fd in (r, w):
        os.set_inheritable(fd, False)
    return r, w


def once(target: str, size: int, steps: int | None) -> int:
    """One fresh trial, as a training script: build, then steps at size (None:
    until batchfit stops it). An exception ends the process, so batchfit's hook
    and exit status see it."""
    runner = _trial.Runner(_trial.load(target), name=target)
    for _ in itertools.count() if steps is None else range(steps):
        runner.step(size)
    return 0


def _once_steps(steps: int | None) -> int | None:
    """The steps of a fresh trial: --steps, else BATCHFIT_STEPS, else 3; None
    in a --soak (BATCHFIT_SOAK=1), which runs until batchfit's SIGTERM, when
    the adapter reports and ends it."""
    if steps:
        return steps
    if os.environ.get(_hook.SOAK_ENV) == "1":
        return None
    # BATCHFIT_STEPS=0 (--steps 0) means "to the program's own end", which a
    # Trial does not have.
    return _env_int("BATCHFIT_STEPS", 0) or DEFAULT_STEPS


def main(argv: Sequence[str] | None = None) -> int:
    once_size, steps, target = _parse(sys.argv[1:] if argv is None else argv)
    fds = _channel_fds()
    if fds is None:
        if once_size is None:
            once_size = _env_int("BATCHFIT_BATCH_SIZE", 0) or None
        if once_size is None:
            raise SystemExit(f"batchfit.worker: no channel ({FDS_ENV}) and no batch size: run it through batchfit, "
                             f"or give --once SIZE\n{_USAGE}")
        return once(target, once_size, _once_steps(steps))
    # A warm worker runs many trials in one process: the adapter's stop after
    # BATCHFIT_STEPS steps, meant for a fresh trial, must never end it (it is
    # off anyway without a report file, which batchfit gives workers none of).
    _hook.run_to_end()
    global serving
    serving = True
    channel = Channel(*fds)
    stage = "setup"
    try:
        warmup = _env_int(WARMUP_ENV, 1)
        worker = Worker(target, warmup=warmup, warmup_steps=max(_env_int(WARMUP_STEPS_ENV, 1), 1))
        stage = "hello"
        hello = worker.hello()
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        import traceback

        msg: dict[str, Any] = {"type": "fatal", "stage": stage}
        if isinstance(e, _trial.WarmupError):
            failure = e.failure
            msg.update(stage="warmup", outcome=failure.outcome, exception=failure.exception,
                       traceback=failure.traceback, warmup_size=e.size)
        else:
            msg.update(exception=describe(e),
                       traceback="".join(traceback.format_exception(type(e), e, e.__traceback__))[-(64 << 10):])
        sys.stderr.write(msg.get("traceback") or (msg["exception"] + "\n"))
        sys.stderr.flush()
        channel.send(msg)
        return 1
    channel.send(hello)
    code = serve(channel, worker)
    # The process exists only for batchfit: leave at once rather than wait
    # for the Trial's threads and atexit handlers (a data loader's, a
    # logger's) while batchfit waits to start the next worker.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _watch_ooms(torch: Any) -> None:
    """Have torch's OOM observer record what each trial's allocator refused
    (batchfit.frameworks), as the adapter's hook does in a fresh trial: the
    worker runs without the hook's report, and its trials report the
    refusal themselves (oom_request)."""
    try:
        from batchfit._runtime import frameworks

        attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
        if callable(attach):
            frameworks._attach_observer(attach)
    except Exception:
        pass


def _frameworks_state() -> Any:
    """The adapter's framework state (torch's OOM observer writes to it)."""
    from batchfit._runtime import frameworks

    return frameworks._state


def _packages() -> list[str]:
    """The third-party top-level packages this process imported (the
    trial's module and what it imports), as the adapter reports them."""
    try:
        from batchfit._runtime import hook

        return hook.third_party_packages()
    except Exception:
        return []


if __name__ == "__main__":
    sys.exit(main())
