"""batchfit.batch_size(): the batch size to train at, found by one line of
the training script itself.

    import batchfit
    batch_size = batchfit.batch_size(memory_limit="24GiB")

Outside a batchfit trial the call runs ``batchfit search`` on the program
that makes it: the same interpreter and command line (``sys.orig_argv``, so
``python -m pkg`` and the interpreter's own options too), working directory
and environment. Every trial runs the program again from its start, where
the same call returns the trial's size (BATCHFIT_BATCH_SIZE) at once and
the adapter's report says so (``size_read``): the command needs no ``{}``,
and batchfit takes the size as used. Back in the program that called it,
the search's answer comes back and the program trains at it, in the same
run. A second run of an unchanged program is answered from batchfit's
history.

The search needs the GPU to itself: a process that has started CUDA
(torch) or a JAX GPU backend holds memory on the card outside every trial,
which would count against each of them; the call refuses then.

Every trial that calls batch_size() imports this module, so it imports
only os and sys; the API (batchfit.api) is imported to search.
"""

from __future__ import annotations

import os
import sys

# typing and the API are imported for type checkers only (mypy takes any
# TYPE_CHECKING as true), as in batchfit/__init__.py: a trial loads nothing
# more than os and sys for this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable

    from batchfit.api import BatchfitError, Result
del TYPE_CHECKING

__all__ = ["batch_size", "command"]

#: The variable through which a trial gets its batch size.
SIZE_ENV = "BATCHFIT_BATCH_SIZE"
#: The answer batch_size() found, for the processes the program starts.
ANSWER_ENV = "BATCHFIT_ANSWER"

_FIX = "call batchfit.batch_size() before the model or any tensor moves to the GPU"


def batch_size(*, progress: bool = True, report: str | os.PathLike | None = None, extra_args: Iterable[str] = (),
               **options: Any) -> int:
    """The largest batch size this program runs at, from ``batchfit search``
    of the program itself; in a batchfit trial, the trial's size.

    Options are ``batchfit search``'s, as ``batchfit.search`` takes them
    (``memory_limit="24GiB"``, ``steps=3``, ``timeout=600`` ...), and so are
    ``progress`` (batchfit's progress lines on stderr), ``report`` (keep the
    HTML report in that file) and ``extra_args``. Raises BatchfitError with
    batchfit's message and hint when the search finds no answer, and before
    any search when this process has already started a GPU runtime, cannot
    be run again (an interactive session, a notebook) or serves batchfit as
    a warm worker (--worker), whose Trial gets each size in its step."""
    from batchfit import in_trial

    _refuse_worker()
    if in_trial():
        return trial_size()
    found = _found()
    if found:
        return found
    from batchfit import api

    _refuse_started_gpu(api.BatchfitError)
    _refuse_ranks(api.BatchfitError)
    result = api.search(command(), cwd=os.getcwd(), progress=progress, report=report, extra_args=extra_args, **options)
    answer = _answer(result, progress)
    # The processes this one starts run its top level again (DataLoader
    # workers of a spawn or forkserver context, the other ranks Lightning
    # launches): they inherit the answer instead of searching anew.
    os.environ[ANSWER_ENV] = str(answer)
    return answer


def _found() -> int:
    """The answer a parent process found (ANSWER_ENV), or 0."""
    try:
        return max(int(os.environ.get(ANSWER_ENV) or 0), 0)
    except ValueError:
        return 0


def _refuse_worker() -> None:
    """Refuse in a warm worker (--worker), which loads the Trial's module
    once for many trials of many sizes: none is the process's size, and a
    search from inside it would search the worker."""
    worker = sys.modules.get("batchfit._runtime.worker")
    if worker is not None and getattr(worker, "serving", False):
        from batchfit.api import BatchfitError

        raise BatchfitError("batchfit.batch_size() in a warm worker (--worker): its trials have many sizes",
                            hint="a Trial gets each trial's size in its step; call batch_size() in a training "
                                 "script that batchfit runs whole (without --worker)")


def trial_size() -> int:
    """The size of the batchfit trial this process runs as, which the
    trial's report then says the program took."""
    value = os.environ.get(SIZE_ENV, "")
    try:
        size = int(value)
    except ValueError:
        size = 0
    if size <= 0:
        from batchfit.api import BatchfitError

        raise BatchfitError(f"batchfit.batch_size() in a batchfit trial without a batch size: ${SIZE_ENV} is {value!r}",
                            hint="a warm worker (--worker) hands its Trial the size in step(state, batch_size); "
                                 "run the script in fresh trials")
    # The hook's state, where the hook runs (it is loaded already): the
    # exit event then says the size was read. No hook, nothing to say.
    runtime = sys.modules.get("batchfit._runtime.state")
    if runtime is not None:
        runtime.state.size_read = True
    return size


def command() -> list[str]:
    """The command line that runs this program again from its start: this
    interpreter (sys.executable), its options and the program's arguments.
    Raises BatchfitError where there is none: an interactive session, a
    notebook, or ``python -c`` before Python 3.10."""
    from batchfit.api import BatchfitError

    if _interactive():
        raise BatchfitError(
            "batchfit.batch_size() searches by running this program again from its start, which an interactive "
            "session or a notebook cannot do",
            hint="call it in a training script run as python train.py, or search a script from here: "
                 "batchfit.search(\"python train.py --batch-size {}\")")
    orig = getattr(sys, "orig_argv", None)  # Python 3.10 and later
    main = sys.modules.get("__main__")
    if orig:
        args = list(orig[1:])
        # A script's path as typed is relative to where it was started,
        # which the program may have left (os.chdir): __main__.__file__ is
        # absolute (Python 3.9 and later).
        path = getattr(main, "__file__", None)
        if getattr(main, "__spec__", None) is None and path and sys.argv and sys.argv[0] in args:
            args[args.index(sys.argv[0])] = path
        return [sys.executable, *args]
    # Before 3.10: sys.argv less the interpreter's options, which are lost.
    first = sys.argv[0] if sys.argv else ""
    if first == "-c":
        raise BatchfitError("batchfit.batch_size() cannot run python -c again before Python 3.10 (no sys.orig_argv)",
                            hint="put the code in a script")
    spec = getattr(main, "__spec__", None)
    # A directory or zip run as a script has the spec __main__: its path is argv[0].
    if spec is not None and spec.name and spec.name != "__main__":
        # python -m pkg runs pkg.__main__, and sys.argv[0] is its path.
        name = spec.name[: -len(".__main__")] if spec.name.endswith(".__main__") else spec.name
        return [sys.executable, "-m", name, *sys.argv[1:]]
    return [sys.executable, *sys.argv]


def _interactive() -> bool:
    """Whether this process is a REPL, python -i, or a notebook's kernel:
    running its command line again would not run the program."""
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return True
    if not sys.argv or sys.argv[0] in ("", "-"):
        return True
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    try:
        return callable(get) and get() is not None
    except Exception:
        return False


def started_gpu() -> str:
    """What GPU runtime this process has started, in words; "" for none:
    torch's CUDA (HIP on ROCm) once initialised, a JAX GPU backend."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is not None and cuda.is_initialized():
            return "torch has initialised CUDA"
    except Exception:
        pass
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is not None:
        backends = getattr(bridge, "_backends", None)
        try:
            if isinstance(backends, dict):
                gpus = sorted(name for name in backends if name in ("cuda", "rocm", "gpu"))
                if gpus:
                    return f"JAX has initialised its {gpus[0]} backend"
            elif bridge.backends_are_initialized():
                return "JAX has initialised its backends"
        except Exception:
            pass
    return ""


def _refuse_started_gpu(error: type[BatchfitError]) -> None:
    started = started_gpu()
    if started:
        raise error(f"batchfit.batch_size() must run before this program uses the GPU: {started}, and this "
                    "process's memory on the card would count against every trial", hint=_FIX)


def _refuse_ranks(error: type[BatchfitError]) -> None:
    """One search for one process: under torchrun every rank would search
    the whole program."""
    try:
        world = int(os.environ.get("WORLD_SIZE") or 1)
    except ValueError:
        world = 1
    if world > 1:
        raise error(f"batchfit.batch_size() searches one process, and this is one of {world} (WORLD_SIZE)",
                    hint="search the launch: batchfit search -- torchrun ... train.py, where each rank's "
                         "batchfit.batch_size() returns the trial's size")


def _answer(result: Result, progress: bool) -> int:
    from batchfit.api import BatchfitError

    run = result.run
    if run.answer is None:
        raise BatchfitError(run.error or f"the search found no answer (status {run.status})", result=result)
    if progress:
        print(f"batchfit: batch size {run.answer} ({run.describe()})", file=sys.stderr, flush=True)
    return run.answer
