"""The at-exit report of a batchfit trial.

batchfit runs every trial as a fresh process. Its sitecustomize calls
install() at start-up when BATCHFIT_REPORT names a report file; at interpreter
exit one "exit" event (a JSON line, version 1) is appended to that file with
torch's peak memory counters (or JAX's or TensorFlow's, see frameworks), the
device, the time between optimizer steps, whether a GPU out-of-memory error
ended the program and how many the program caught, and what the program's
answer depends on: the source files it loaded and the files it opened for
reading.

When BATCHFIT_STEPS is a positive N, the trial ends after its N-th training
step (see steps.stop): the exit event is written at once with "stopped":
true and the process exits with status 0. What counts as a step: for torch,
a step of the first optimizer that steps (torch_steps); for JAX, see
jax_steps.

The hook's jobs, one module each:

- imports: the post-import hook, which runs a callback once the program has
  imported a module.
- torch_steps, jax_steps: telling a training step; steps: counting them and
  stopping the trial after the last.
- batches: the shapes of the batch each step consumed (a torch DataLoader's
  batch, else the outermost module's arguments; a jitted JAX step's
  arguments), and whether a trial whose shapes vary goes on past its last
  step until they stop growing (BATCHFIT_SHAPE_PATIENCE steps,
  BATCHFIT_SHAPE_SECONDS).
- loader: a DataLoader over a map-style dataset whose batches vary serves
  its largest batches first (BATCHFIT_WORST_CASE=0 turns it off; a soak
  gets its whole epoch largest first).
- gate: a trial started while another has the GPU waits there before it
  touches the GPU (BATCHFIT_GATE_FD).
- jax_plan: a jitted step's memory plan, read from XLA's compile before it
  runs, which ends a trial whose step cannot fit in the pool.
- report: the exit event and writing it; frameworks: what JAX and
  TensorFlow add to it, and the OOMs a program caught.
- sources: the files the program loaded and opened, and its packages.

Rules these modules keep, because they run inside someone else's program:

- No framework is imported here (torch, jax, optax, tensorflow). A
  post-import hook notices when the program imports one, and only then are
  its hooks installed.
- Every error of our own is swallowed; the program's behaviour is unchanged
  apart from one torch.cuda.synchronize() per optimizer step (only when CUDA
  is initialized) or one jax.block_until_ready() per JAX step (and a JAX
  step compiled ahead of its first call with each new shape, see jax_plan), so that step
  times cover the device work, the stop after BATCHFIT_STEPS steps (later
  where batch shapes vary, see batches), and, where a DataLoader's batches
  vary in shape, its first batches: its largest are added at the start of
  its first epoch (the largest until step 2 has run, then the next
  largest), read once more on the CPU before the first step (see loader),
  with the random state put back; a soak's first epoch is reordered,
  largest first, and keeps its length.
- Only the process that installed the hook reports: a forked child inherits
  the atexit handler but is not a trial of its own.
"""

from __future__ import annotations

import atexit
import os
from types import ModuleType

from batchfit._runtime import gate, report, sources, steps
from batchfit._runtime.imports import after_import
from batchfit._runtime.jax_steps import jax_imported, optax_imported
from batchfit._runtime.report import (
    EVENT_VERSION,
    REPORT_FAILED,
    append,
    caused_by_oom,
    describe,
    exit_event,
    is_oom,
)
from batchfit._runtime.sources import is_third_party, loaded_sources, opened_files, third_party_packages
from batchfit._runtime.state import state
from batchfit._runtime.steps import STEPS_ENV
from batchfit._runtime.torch_steps import torch_imported

__all__ = [
    "CPU_THREADS_ENV", "EVENT_VERSION", "REPORT_ENV", "REPORT_FAILED", "SOAK_ENV", "STEPS_ENV",
    "append", "caused_by_oom", "describe", "exit_event", "install", "is_oom", "is_third_party",
    "loaded_sources", "opened_files", "prepare_for_fork", "run_to_end", "third_party_packages",
]

REPORT_ENV = "BATCHFIT_REPORT"
SOAK_ENV = "BATCHFIT_SOAK"
# Set for trials that run at the same time as others: their share of the
# CPUs (internal/adapter CPUThreadsEnv).
CPU_THREADS_ENV = "BATCHFIT_CPU_THREADS"


def install(path: str | None = None) -> bool:
    """Arrange for an exit event to be appended to path (default: the file
    named by BATCHFIT_REPORT). Returns False, doing nothing, when there is no
    report file or the hook is already installed."""
    if state.path is not None:
        return False
    path = path or os.environ.get(REPORT_ENV)
    if not path:
        return False
    state.path = path
    state.pid = os.getpid()
    state.stop_at = steps.steps_from_env()
    state.script = sources.script()
    # Registered before the program runs, so it runs after the program's own
    # atexit handlers (atexit is last-in, first-out).
    atexit.register(report.at_exit)
    report.wrap_excepthook()
    sources.watch_opens()
    if os.environ.get(SOAK_ENV) == "1":
        steps.stop_on_sigterm()
    _share_cpus()
    gate.install(after_import)
    after_import("torch", torch_imported)
    after_import("jax", jax_imported)
    after_import("optax", optax_imported)
    try:
        from batchfit._runtime import frameworks

        frameworks.install(after_import)
    except Exception:
        pass
    return True


def _share_cpus() -> None:
    """Hold the trial's torch to its share of the CPUs when batchfit runs
    others at the same time: OpenMP reads OMP_NUM_THREADS when torch loads
    it, so it is set first (unless the program's environment set it), and
    torch is told once loaded (a trial forked from batchfit's fork server
    loaded it before the trial began)."""
    try:
        n = int(os.environ.get(CPU_THREADS_ENV, ""))
    except ValueError:
        return
    if n < 1:
        return
    os.environ.setdefault("OMP_NUM_THREADS", str(n))

    def limit(torch: ModuleType) -> None:
        try:
            torch.set_num_threads(n)
        except Exception:
            pass

    after_import("torch", limit)


def prepare_for_fork() -> None:
    """In batchfit's fork server, before it preloads modules: wrap what
    install() would wrap as soon as the program imports it, where what is
    wrapped could be captured by later imports (a package that does
    `from jax import jit` at import time keeps the function it found). A
    forked trial then sees the same wrapped functions as a fresh one; its
    install() finds them wrapped and leaves them. Counting needs the report
    that install() starts, so nothing is counted in the server."""
    after_import("jax", jax_imported)
    after_import("optax", optax_imported)


def run_to_end() -> None:
    """Never stop this process at the step limit. The warm worker calls it:
    it runs many trials in one process, and batchfit counts their steps."""
    state.stop_at = 0
