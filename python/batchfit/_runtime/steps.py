"""Counting a trial's training steps, whichever framework takes them, and
ending the trial after its last one (BATCHFIT_STEPS, or a soak's SIGTERM)."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, Hashable, NoReturn

from batchfit._runtime import batches, report
from batchfit._runtime.state import state

STEPS_ENV = "BATCHFIT_STEPS"

# Bounds the step times and peaks kept, so that one event stays a
# reasonable single write even for a long run.
_MAX_STEP_TIMES = 10000


def steps_from_env() -> int:
    """BATCHFIT_STEPS as a step limit: a positive integer, else 0 (the
    program runs to its own end: unset, "0" from --steps 0, or garbage)."""
    try:
        return max(int(os.environ.get(STEPS_ENV, "").strip()), 0)
    except ValueError:
        return 0


def stop_on_sigterm() -> None:
    """In a --soak trial batchfit ends the program with SIGTERM when the
    soak's time is up. Python's default action would die without a report;
    instead the report (with the per-step peaks) is written and the program
    leaves as after its last step (see stop). The handler runs between
    bytecodes of the main thread, so after the device work of a call that
    is under way."""
    try:
        signal.signal(signal.SIGTERM, lambda signum, frame: stop())
    except (ValueError, OSError):
        pass  # not the main thread: the soak ends without a report


def owns_steps(key: Hashable) -> bool:
    """Whether the steps of key (a torch optimizer's id, a JAX step
    function's key) are counted: the first one that steps owns the count. A
    second optimizer (a GAN's, say) would halve the step times and double
    the count."""
    if state.optimizer is None:
        state.optimizer = key
    return key == state.optimizer


def count_step(peak: int | None) -> None:
    """One training step has finished (its device work included); peak is
    the framework's peak memory in bytes after it, or None. After the
    BATCHFIT_STEPS-th step the program is stopped, unless its batches vary
    and it goes on until they stop growing (batches.keep_going)."""
    now = time.perf_counter()
    if state.last_step is not None and len(state.step_times) < _MAX_STEP_TIMES:
        state.step_times.append(now - state.last_step)
    state.last_step = now
    state.steps += 1
    if peak is not None and len(state.step_peaks) < _MAX_STEP_TIMES:
        state.step_peaks.append(peak)
    try:
        batches.on_step(state.steps)
    except Exception:
        pass
    # A forked child inherits the count but is not the trial (see
    # report.at_exit): only the process that installed the hook is stopped.
    if 0 < state.stop_at <= state.steps and os.getpid() == state.pid:
        if not batches.keep_going(state.steps, state.stop_at):
            stop()


def stop() -> None:
    """End the trial after its last counted step: write the exit event with
    "stopped", flush the program's output, and leave with status 0 through
    os._exit, running nothing more of the program.

    Why os._exit, and not SystemExit raised from the step hook:

    - The hook runs deep inside the program: inside optimizer.step(), inside
      a framework's training loop. An exception raised there is the
      program's to handle. `except BaseException:` and `finally:` blocks and
      frameworks' error paths (Lightning's teardown and on_exception
      callbacks, a save-on-interrupt callback) would run: they may save a
      checkpoint, evaluate, hang, or swallow it and train on. In a training
      loop on a thread SystemExit would end only that thread.
    - Under torchrun/DDP every rank must stop at the same step, and does:
      each rank counts its own optimizer's steps, and DDP keeps them in
      lockstep (no rank's step N starts before the all-reduce of step N's
      gradients, which needs every rank; GradScaler skips a step on all
      ranks alike, as it reads the reduced gradients). Before stopping, the
      hook has waited for the device (torch.cuda.synchronize() waits for
      every stream, NCCL's too; JAX: block_until_ready on the step's
      outputs), so no collective this rank joined is still in flight. After
      that os._exit leaves nothing that could wait for a peer that has
      already gone: no destroy_process_group() barrier, no atexit handler or
      finally block that talks to other ranks, no process-group destructor.
      With SystemExit, a rank's clean-up could block on peers that left.
      Multi-process JAX is SPMD: every process calls the same jitted step
      function, so every process counts the same steps.
    - What is skipped: the program's atexit handlers, finally blocks and its
      own unflushed files. A trial's output is a log and its result is the
      report; batchfit ends what the trial leaves running (data loader
      workers) with its process group.

    The report is written first and stdout and stderr are flushed, so that
    the log holds everything the program printed."""
    leave({"stopped": True}, 0)


def leave(fields: dict[str, Any], status: int, line: str = "") -> NoReturn:
    """End the trial now, as stop() does: the exit event with fields added,
    then the program's output flushed, then line (if any) on stderr, then
    os._exit(status)."""
    try:
        event = report.exit_event()
        event.update(fields)
        report.write(event)
        state.reported = True
    except Exception:
        pass
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    if line:
        try:
            os.write(2, line.encode("utf-8", "replace"))
        except OSError:
            pass
    os._exit(status)
