"""The gate a trial started early waits at before it touches the GPU.

batchfit starts the next trial of a held proof while the current one still
has the GPU (a held card is one trial's alone), so that its interpreter,
imports and CPU work overlap that trial. Such a trial inherits the read end
of a pipe, named by BATCHFIT_GATE_FD; the hook waits on it the first time the
program starts its framework on the GPU:

- torch: torch.cuda._lazy_init, which torch's C++ calls through the module
  for every first CUDA use, and torch._C._cuda_init, which every
  _lazy_init (a reference taken before the hook's included) calls;
- JAX: jax._src.xla_bridge.backends, which makes the clients, and with them
  XLA's pool.

A byte lets the program on; the pipe's end without one (batchfit is gone)
ends the process there, before it touches the GPU. A program that reaches
the GPU another way is not held: batchfit watches the early trial's GPU
memory until its gate opens, and when it held any, runs the trial beside it
again and starts no trial early from then on.

Every process of the trial waits at the gate once, the first time it
starts the GPU: a forked child (a multiprocessing rank) keeps the parent's
pipe, and a program run with its descriptors kept (a shell script's
python) inherits it; batchfit writes a byte for each. Programs started
through subprocess (torchrun's ranks) lose the descriptor and are not
held: batchfit starts no trial early for a program that runs several.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from types import ModuleType
from typing import Any, Callable

GATE_ENV = "BATCHFIT_GATE_FD"
# The exit status of a trial whose gate closed unopened: not 0, which would
# read as a trial that ran.
GATE_CLOSED_EXIT = 75

_lock = threading.Lock()
_fd: int | None = None
_waited_in: int | None = None  # the process that passed the gate
waited: float | None = None  # seconds it spent at the gate
_set_threads: Callable[[int], None] | None = None  # torch's own set_num_threads
_threads: int | None = None  # torch's threads, restored once through
_armed_in: int | None = None  # the process whose torch runs on one thread until then


def install(after_import: Callable[[str, Callable[[ModuleType], Any]], None]) -> bool:
    """Arm the gate when the trial has one: the hooks on torch and JAX are
    added as they are imported. Returns whether there is a gate."""
    global _fd
    try:
        # "FD:INODE": the pipe's inode tells it from a descriptor that a
        # program closed and reused (subprocess closes inherited ones).
        fd, ino = (int(x) for x in os.environ[GATE_ENV].split(":"))
        st = os.fstat(fd)
    except (KeyError, ValueError, OSError):
        return False
    if not stat.S_ISFIFO(st.st_mode) or st.st_ino != ino:
        return False
    _fd = fd
    try:
        # A fork while another thread waits would leave the child's lock held.
        os.register_at_fork(after_in_child=_new_lock)
    except Exception:
        pass
    after_import("torch", _gate_torch)
    after_import("jax", _gate_jax)
    return True


def _new_lock() -> None:
    global _lock
    _lock = threading.Lock()


def wait() -> None:
    """Wait at the gate, once a process: return when batchfit opens it; exit
    when its pipe ends unopened."""
    global waited, _waited_in
    pid = os.getpid()
    if _fd is None or _waited_in == pid:
        return
    with _lock:
        if _waited_in == pid:
            return
        start = time.monotonic()
        try:
            opened = os.read(_fd, 1)
        except OSError:
            opened = b""
        if not opened:
            # batchfit is gone: the trial must not run unwatched, nor
            # look as if it ran.
            try:
                os.write(2, b"batchfit adapter: the trial's gate closed before its turn\n")
            finally:
                os._exit(GATE_CLOSED_EXIT)
        _waited_in, waited = pid, time.monotonic() - start
        _restore_threads()


def _gated(fn: Callable[..., Any]) -> Callable[..., Any]:
    def gated(*args: Any, **kwargs: Any) -> Any:
        wait()
        return fn(*args, **kwargs)

    gated._batchfit_gated = True  # type: ignore[attr-defined]
    gated.__wrapped__ = fn  # type: ignore[attr-defined]
    return gated


def _wrap(owner: Any, name: str) -> None:
    fn = getattr(owner, name, None)
    if callable(fn) and not getattr(fn, "_batchfit_gated", False):
        try:
            setattr(owner, name, _gated(fn))
        except Exception:
            pass


def _gate_torch(torch: ModuleType) -> None:
    _one_thread_until_through(torch)
    cuda = sys.modules.get("torch.cuda") or getattr(torch, "cuda", None)
    if cuda is not None:
        _wrap(cuda, "_lazy_init")
    c = getattr(torch, "_C", None)
    if c is not None:
        _wrap(c, "_cuda_init")


def _one_thread_until_through(torch: ModuleType) -> None:
    """Run torch's CPU work (a model built on the CPU, say) on one thread
    until the trial is through its gate, then on the threads torch chose,
    or the program asked for meanwhile: before it, the trial on the GPU has
    the machine's CPUs, and its step times stay its own."""
    global _threads, _set_threads, _armed_in
    if _waited_in == os.getpid():
        return  # torch imported once through: nothing to hold back
    try:
        original: Callable[[int], None] = torch.set_num_threads
        threads = int(torch.get_num_threads())
        original(1)
    except Exception:
        return
    _armed_in, _threads, _set_threads = os.getpid(), threads, original

    def set_num_threads(n: int) -> None:
        global _threads
        if os.getpid() != _armed_in or _waited_in == _armed_in:
            # Another process (a forked worker), or one through: as asked.
            original(n)
        else:
            _threads = int(n)  # the program's choice, for once it is through

    set_num_threads.__wrapped__ = original  # type: ignore[attr-defined]
    try:
        setattr(torch, "set_num_threads", set_num_threads)
    except Exception:
        pass


def _restore_threads() -> None:
    try:
        if _set_threads is not None and _threads and os.getpid() == _armed_in:
            _set_threads(_threads)
    except Exception:
        pass


def _gate_jax(jax: ModuleType) -> None:
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is not None:
        _wrap(bridge, "backends")
