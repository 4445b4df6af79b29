"""The exit event: what a trial reports when it ends (one JSON line appended
to the report file), and how the error that ended it is told apart."""

from __future__ import annotations

import os
import sys
from types import ModuleType, TracebackType
from typing import Any

from batchfit._runtime import batches, gate, sources
from batchfit._runtime.state import state

EVENT_VERSION = 1
# Begins the line said on stderr when the report cannot be written
# (internal/adapter ReportFailedPrefix): batchfit reads stderr as it comes,
# whatever the disk, and stops rather than judge the trial without it.
REPORT_FAILED = "batchfit adapter: report not written: "

# Bounds that keep one event a reasonable single write even for a long run.
_MAX_EXCEPTION = 1000
_MAX_CHAIN = 100


def wrap_excepthook() -> None:
    """Keep the exception that ends the program, for its exit event."""
    previous = sys.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> Any:
        state.exception = exc
        return previous(exc_type, exc, tb)

    sys.excepthook = excepthook


def exit_event() -> dict[str, Any]:
    """The exit event for this process as a dict (the JSON object written)."""
    event: dict[str, Any] = {"version": EVENT_VERSION, "event": "exit", "pid": os.getpid()}
    rank = _rank()
    if rank is not None:
        event["rank"] = rank
    exc = _ending_exception()
    if exc is not None:
        try:
            event["exception"] = describe(exc)
            if caused_by_oom(exc):
                event["oom"] = True
        except Exception:
            pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            event["torch"] = str(torch.__version__)
        except Exception:
            pass
        try:
            event.update(_cuda_memory(torch))
        except Exception:
            pass
    try:
        from batchfit._runtime import frameworks

        event.update(frameworks.exit_fields(event, exc))
    except Exception:
        pass
    try:
        from batchfit._runtime import jax_plan

        event.update(jax_plan.event_fields())
    except Exception:
        pass
    if state.size_read:
        event["size_read"] = True
    if gate.waited is not None:
        event["gate_wait"] = round(gate.waited, 3)
    if state.steps:
        event["steps"] = state.steps
    if state.step_times:
        event["step_times"] = list(state.step_times)
    if state.step_peaks:
        event["step_peaks"] = list(state.step_peaks)
    try:
        seen = batches.event_fields(state.steps)
        if seen:
            event["batches"] = seen
    except Exception:
        pass
    try:
        packages = sources.third_party_packages()
        if packages:
            event["packages"] = packages
    except Exception:
        pass
    loaded: list[dict[str, Any]] = []
    try:
        loaded, truncated = sources.loaded_sources()
        if loaded:
            event["sources"] = loaded
        if truncated:
            event["sources_truncated"] = True
    except Exception:
        pass
    try:
        opened = sources.opened_files({s["path"] for s in loaded})
        if opened:
            event["opened"] = opened
    except Exception:
        pass
    return event


def at_exit() -> None:
    """The atexit handler: report, once, from the process that installed the
    hook (a forked child inherits the handler but is not a trial of its own)."""
    try:
        if os.getpid() != state.pid or state.reported:
            return
        write(exit_event())
    except Exception:
        pass


def write(event: dict[str, Any]) -> None:
    """Append event to the report; when that fails, say so on stderr as
    REPORT_FAILED describes: a report that is silently missing would let
    batchfit take an OOM the program caught for a trial that fits."""
    if state.path is None:
        return  # install() has not run: there is no report file
    try:
        append(state.path, event)
    except OSError as e:
        for stream in (sys.stderr, sys.__stderr__):
            try:
                stream.flush()
            except Exception:
                pass
        why = e.strerror or str(e)
        line = f"\n{REPORT_FAILED}{why} (errno {e.errno or 0}): {state.path}\n"
        try:
            os.write(2, line.encode("utf-8", "replace"))
        except OSError:
            pass


def append(path: str, event: dict[str, Any]) -> None:
    """Append event to the report file as one JSON line, in one write on an
    O_APPEND file so that lines from several processes never interleave.
    A write that fails, or takes only part of the line (a disk that fills
    up), raises OSError: what a short write left is retried, so that the
    error the disk gives is the one raised. json is imported here, at
    exit, rather than into every program at start-up."""
    import errno
    import json

    data = (json.dumps(event, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        while data:
            n = os.write(fd, data)
            if n <= 0:
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            data = data[n:]
    finally:
        os.close(fd)


def _rank() -> int | None:
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name)
        if value is None:
            continue
        try:
            return int(value.strip())
        except ValueError:
            continue
    return None


def _ending_exception() -> BaseException | None:
    if state.exception is not None:
        return state.exception
    # The program may have replaced sys.excepthook after us. Python keeps the
    # exception it printed as sys.last_value (sys.last_exc from 3.12); an
    # interactive session sets these for errors it survived, so not there.
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return None
    exc = getattr(sys, "last_exc", None)
    if exc is None:
        exc = getattr(sys, "last_value", None)
    return exc


def _cuda_memory(torch: ModuleType) -> dict[str, Any]:
    cuda = getattr(torch, "cuda", None)
    # is_initialized() first: it asks nothing of the driver, whereas
    # is_available() might start CUDA at exit in a program that never used it.
    if cuda is None or not cuda.is_initialized() or not cuda.is_available():
        return {}
    index = cuda.current_device()
    out: dict[str, Any] = {"cuda_initialized": True, "device_index": index}
    out["max_memory_allocated"] = int(cuda.max_memory_allocated(index))
    out["max_memory_reserved"] = int(cuda.max_memory_reserved(index))
    try:
        # The cap the allocator kept to: batchfit checks it is the one its
        # memory limit set (a program may set its own).
        out["memory_fraction"] = float(cuda.get_per_process_memory_fraction(index))
    except Exception:
        pass
    try:
        out["device"] = str(cuda.get_device_name(index))
        out["device_total"] = int(cuda.get_device_properties(index).total_memory)
    except Exception:
        pass
    return out


def describe(exc: BaseException) -> str:
    """"Type: first line of the message", as a traceback would name the type."""
    cls = type(exc)
    name = getattr(cls, "__qualname__", None) or cls.__name__
    module = getattr(cls, "__module__", None)
    if module and module not in ("builtins", "__main__"):
        name = f"{module}.{name}"
    try:
        message = str(exc).strip()
    except Exception:
        message = "<unprintable>"
    if message:
        name = f"{name}: {message.splitlines()[0]}"
    return name[:_MAX_EXCEPTION]


def caused_by_oom(exc: BaseException | None) -> bool:
    """Whether exc, or an exception it was raised from or while handling, is a
    GPU out-of-memory error of torch, JAX or TensorFlow."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(exc))
        if is_oom(exc):
            return True
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__
    return False


def is_oom(exc: BaseException) -> bool:
    """Whether exc itself is a GPU out-of-memory error of torch, JAX or
    TensorFlow."""
    try:
        from batchfit._runtime import frameworks

        if frameworks.is_oom(exc):
            return True
    except Exception:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        classes = []
        for owner in (torch, getattr(torch, "cuda", None)):
            cls = getattr(owner, "OutOfMemoryError", None)
            if isinstance(cls, type):
                classes.append(cls)
        if classes and isinstance(exc, tuple(classes)):
            return True
    if isinstance(exc, RuntimeError):
        # torch before 1.13 raised a plain RuntimeError; ROCm says HIP.
        message = str(exc)
        return "out of memory" in message and ("CUDA" in message or "HIP" in message)
    return False
