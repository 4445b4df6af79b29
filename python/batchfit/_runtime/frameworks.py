"""What the hook knows of each framework beyond torch's optimizer steps.

- JAX and TensorFlow report their own peak memory per device at exit (JAX's
  ``memory_stats()``, TensorFlow's ``get_memory_info()``): JAX preallocates
  most of the card, so the device's memory says nothing about a JAX program.
- TensorFlow is held to batchfit's ``--memory-limit`` here, by a logical
  device memory limit set as soon as the program imports it (JAX and torch
  take theirs from environment variables that batchfit sets).
- Every GPU out-of-memory error raised into Python is counted, whether the
  program lets it end the run or catches it (as batch-size finders and
  "skip the batch" loops do): a trial that ran out of memory does not fit,
  whatever its exit status.

How OOMs are counted: the ``__init__`` of each framework's OOM error class
(``torch.OutOfMemoryError``; JAX's ``XlaRuntimeError``/``JaxRuntimeError``
when its message says RESOURCE_EXHAUSTED; TensorFlow's
``ResourceExhaustedError`` on a GPU) is wrapped once the program imports the
framework, so each such error object is counted once when it is created,
which is when the framework's C++ error reaches Python. Errors that a
framework raises and handles inside C++ never become Python objects and are
not counted: torch's cuDNN workspace search catches allocator OOMs and falls
back to another algorithm, and the program runs. For torch the caching
allocator's OOM observer also records the size of every refused request
(those internal ones included), for the report only.

Like batchfit.hook, this module never imports a framework (install() is given
the hook's post-import registration), and swallows every error of its own.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any, Callable

TF_LIMIT_ENV = "BATCHFIT_TF_MEMORY_LIMIT_MB"

# Bounds that keep one event a reasonable single write.
_MAX_OOM_REQUESTS = 20
_MAX_DEVICES = 64
_MAX_CHAIN = 100

# The attribute that marks an error object as counted, so that an error
# constructed through two wrapped __init__s (a subclass's calling its base's)
# counts once, and so that the ending exception's own OOMs can be told from
# those the program caught.
_MARK = "_batchfit_oom"

# TensorFlow dtype names and their sizes, for the bytes of "OOM when
# allocating tensor with shape[...] and type T".
_TF_DTYPE_BYTES = {
    "float": 4, "half": 2, "bfloat16": 2, "double": 8, "int8": 1, "uint8": 1,
    "int16": 2, "int32": 4, "int64": 8, "bool": 1, "complex64": 8,
}


class _State:
    def __init__(self) -> None:
        self.pid: int | None = None
        self.ooms = 0  # OOM error objects created in this process
        self.requests: list[dict[str, int]] = []
        # The latest refused request, kept past the list's bound: a warm
        # worker reports each trial's own.
        self.last_request: dict[str, int] | None = None
        # Device figures per framework, read by the at-exit readers, and
        # the readers themselves, for an exit that runs no atexit handler.
        self.devices: dict[str, list[dict[str, int]]] = {}
        self.readers: dict[str, Callable[[], list[dict[str, int]]]] = {}
        self.read: set[str] = set()  # readers that ran, whatever they found


_state = _State()


def install(after_import: Callable[[str, Callable[[Any], None]], None]) -> None:
    """Watch for the frameworks: after_import(name, callback) runs callback
    with the module once the program has imported it (batchfit.hook's
    post-import hook)."""
    _state.pid = os.getpid()
    after_import("torch", _torch_imported)
    after_import("jax", _jax_imported)
    after_import("tensorflow", _tensorflow_imported)


def exit_fields(event: dict[str, Any], ending: BaseException | None) -> dict[str, Any]:
    """The fields this module adds to the exit event: which framework's
    memory figures the event holds (torch's when it used CUDA, as the hook
    already put them in event; else JAX's, else TensorFlow's), its devices,
    and the OOMs seen. ending is the exception that ended the program."""
    out: dict[str, Any] = {}
    _read_now()
    if "max_memory_allocated" in event:
        out["framework"] = "torch"
    else:
        for name in ("jax", "tensorflow"):
            devices = _state.devices.get(name)
            if not devices:
                continue
            out["framework"] = name
            out["devices"] = devices
            out["max_memory_allocated"] = max(d.get("peak_bytes", 0) for d in devices)
            limits = [d["limit_bytes"] for d in devices if d.get("limit_bytes")]
            if limits:
                out["memory_limit"] = max(limits)
            break
    caught = _state.ooms - _counted_in_chain(ending)
    if caught > 0:
        out["ooms_caught"] = caught
    if _state.requests:
        out["oom_requests"] = list(_state.requests)
    return out


def is_oom(exc: BaseException) -> bool:
    """Whether exc is a JAX or TensorFlow GPU out-of-memory error (torch's
    are batchfit.hook's to judge). Judged by class name and message, so that
    neither framework need be imported."""
    return _jax_oom(exc) or _tensorflow_oom(exc)


def _counted_in_chain(exc: BaseException | None) -> int:
    """How many counted OOMs the ending exception holds in its chain: those
    did not get caught."""
    n = 0
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(exc))
        if getattr(exc, _MARK, False):
            n += 1
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__
    return n


# Counting OOM errors as they are created.


def _count_errors(classes: list[Any], is_oom_error: Callable[[BaseException], bool],
                  request: Callable[[BaseException], dict[str, int] | None] | None = None) -> None:
    """Wrap the __init__ of each class so that every instance that
    is_oom_error accepts is counted (and its request recorded) on creation."""
    seen: set[int] = set()
    for cls in classes:
        if not isinstance(cls, type) or not issubclass(cls, BaseException) or id(cls) in seen:
            continue
        seen.add(id(cls))
        init = cls.__init__
        if getattr(init, "_batchfit_counting", False):
            continue  # this class, or the base it inherits __init__ from, is wrapped
        try:
            setattr(cls, "__init__", _counting_init(init, is_oom_error, request))
        except (TypeError, AttributeError):
            pass  # an immutable type: its OOMs are seen only when they end the program


def _counting_init(init: Callable[..., None], is_oom_error: Callable[[BaseException], bool],
                   request: Callable[[BaseException], dict[str, int] | None] | None) -> Callable[..., None]:
    def __init__(self: BaseException, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        try:
            if getattr(self, _MARK, False) or not is_oom_error(self):
                return
            setattr(self, _MARK, True)
            _state.ooms += 1
            if request is not None:
                _add_request(request(self))
        except Exception:
            pass

    __init__._batchfit_counting = True  # type: ignore[attr-defined]
    return __init__


def _add_request(req: dict[str, int] | None) -> None:
    if req:
        _state.last_request = req
    if req and len(_state.requests) < _MAX_OOM_REQUESTS:
        _state.requests.append(req)


def _named(exc: BaseException, names: set[str]) -> bool:
    return any(c.__name__ in names for c in type(exc).__mro__)


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return ""


# torch


def _torch_imported(torch: Any) -> None:
    classes = [getattr(torch, "OutOfMemoryError", None), getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)]
    _count_errors([c for c in classes if c is not None], lambda exc: True)
    # The allocator's observer reports the sizes of refused requests.
    # Attaching it initialises CUDA, so it is attached only once the program
    # has done that (torch.cuda._lazy_call runs it then, or now if already).
    lazy_call = getattr(getattr(torch, "cuda", None), "_lazy_call", None)
    attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
    if callable(lazy_call) and callable(attach):
        lazy_call(lambda: _attach_observer(attach))


def _attach_observer(attach: Callable[[Any], None]) -> None:
    # Runs inside torch's CUDA initialisation, which would fail on our error.
    try:
        attach(_torch_oom_observed)
    except Exception:
        pass


def _torch_oom_observed(device: int, alloc: int, limit: int, free: int) -> None:
    """torch's OOM observer: called by the caching allocator before it
    raises, with the device, the bytes asked for, the memory the allocator
    may use (the per-process fraction's cap, else the device's total; torch
    names it device_allocated) and the device's free bytes. An error here
    would replace the program's OOM, so nothing escapes."""
    try:
        req = {"device": int(device), "bytes": int(alloc), "limit": int(limit), "free": int(free)}
    except Exception:
        return
    try:
        # The allocator's own counters, to the byte (its message rounds to
        # 0.01 GiB): batchfit tells a failure that repeats exactly from one
        # at random. The allocator has let go of its lock by now.
        import torch

        stats = torch.cuda.memory_stats(device)
        req["allocated"] = int(stats["allocated_bytes.all.current"])
        req["reserved"] = int(stats["reserved_bytes.all.current"])
    except Exception:
        pass
    _add_request(req)


# JAX


def _jax_imported(jax: Any) -> None:
    classes = []
    for module_name in ("jax.errors", "jaxlib.xla_extension", "jaxlib._jax", "jax._src.lib"):
        module = sys.modules.get(module_name)
        for attr in ("JaxRuntimeError", "XlaRuntimeError"):
            cls = getattr(module, attr, None)
            if cls is not None:
                classes.append(cls)
    _count_errors(classes, _jax_oom, _jax_request)
    _read_at_exit("jax", lambda: _jax_devices(jax))


def _jax_oom(exc: BaseException) -> bool:
    """RESOURCE_EXHAUSTED about memory: "Out of memory while trying to
    allocate", "Failed to allocate request", "Ran out of memory in memory
    space hbm" (compile time, BufferAssignment)."""
    if not _named(exc, {"XlaRuntimeError", "JaxRuntimeError"}):
        return False
    first = _message(exc).strip().split("\n", 1)[0]
    return "RESOURCE_EXHAUSTED" in first and ("memory" in first.lower() or "allocate" in first)


def _jax_request(exc: BaseException) -> dict[str, int] | None:
    import re

    text = _message(exc)
    req: dict[str, int] = {}
    m = re.search(r"device(?: ordinal)? (\d+)", text)
    req["device"] = int(m.group(1)) if m else 0
    m = re.search(r"allocate (\d+) bytes", text) or re.search(r"\((\d+)B\)", text)
    if m:
        req["bytes"] = int(m.group(1))
    else:
        m = re.search(r"allocate ([\d.]+)([KMGT]i?B)\b", text)
        if m:
            scale = 1 << (10 * "KMGT".index(m.group(2)[0]) + 10)
            req["bytes"] = int(float(m.group(1)) * scale)
    return req


def plan_refused(plan: dict[str, int]) -> None:
    """Record the request of a JAX step that jax_plan stopped before it ran:
    the plan's need, against the pool's figures. No error object was made,
    so none is counted (the exit event says "oom" itself)."""
    _add_request({"device": 0, "bytes": plan["need"], "allocated": plan["in_use"],
                  "reserved": plan["in_use"], "limit": plan["limit"], "free": plan["free"]})


def _jax_devices(jax: Any) -> list[dict[str, int]]:
    # Asking for devices before the program has would start JAX's backend at
    # exit (and preallocate most of the card), so only once it has started.
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    if not callable(started) or not started():
        return []
    devices = []
    for i, device in enumerate(jax.local_devices()[:_MAX_DEVICES]):
        stats = device.memory_stats()  # None on CPU
        if not stats or stats.get("peak_bytes_in_use") is None:
            continue
        entry = {"index": i, "peak_bytes": int(stats["peak_bytes_in_use"])}
        for key, field in (("bytes_limit", "limit_bytes"), ("pool_bytes", "pool_bytes")):
            if stats.get(key):
                entry[field] = int(stats[key])
        devices.append(entry)
    return devices


# TensorFlow


def _tensorflow_imported(tf: Any) -> None:
    errors = sys.modules.get("tensorflow.python.framework.errors_impl") or getattr(tf, "errors", None)
    cls = getattr(errors, "ResourceExhaustedError", None)
    if cls is not None:
        _count_errors([cls], _tensorflow_oom, _tensorflow_request)
    limit = os.environ.get(TF_LIMIT_ENV)
    if limit:
        _limit_tensorflow(tf, int(limit))
    _read_at_exit("tensorflow", lambda: _tensorflow_devices(tf))


def _limit_tensorflow(tf: Any, mb: int) -> None:
    """Give every GPU one logical device of mb MiB: TensorFlow's allocator
    then holds the program to it. It must happen before the program creates
    its devices, which is why it runs as the import finishes."""
    config = tf.config
    limited = []
    for gpu in config.list_physical_devices("GPU"):
        try:
            config.set_logical_device_configuration(gpu, [config.LogicalDeviceConfiguration(memory_limit=mb)])
            limited.append(gpu)
        except Exception:
            pass
    if not limited:
        return
    # Memory growth cannot be combined with a logical device configuration,
    # and TensorFlow scripts commonly ask for it: under the limit it is moot,
    # so the request is ignored for these devices instead of failing.
    context: Any = getattr(sys.modules.get("tensorflow.python.eager.context"), "Context", None)
    set_growth: Any = getattr(context, "set_memory_growth", None)
    if callable(set_growth) and not getattr(set_growth, "_batchfit_limited", False):
        def set_memory_growth(self: Any, dev: Any, enable: bool) -> None:
            if dev in limited:
                return
            set_growth(self, dev, enable)

        set_memory_growth._batchfit_limited = True  # type: ignore[attr-defined]
        context.set_memory_growth = set_memory_growth


def _tensorflow_oom(exc: BaseException) -> bool:
    """ResourceExhaustedError "OOM when allocating tensor ..." on a GPU; one
    on the CPU is host memory, which the exit status and output tell."""
    if not _named(exc, {"ResourceExhaustedError"}):
        return False
    text = _message(exc)
    return ("OOM" in text or "out of memory" in text.lower()) and "device:CPU:" not in text


def _tensorflow_request(exc: BaseException) -> dict[str, int] | None:
    import re

    text = _message(exc)
    m = re.search(r"device:GPU:(\d+)", text)
    req = {"device": int(m.group(1)) if m else 0}
    m = re.search(r"shape\[([\d,\s]*)\] and type (\w+)", text)
    if m and m.group(2) in _TF_DTYPE_BYTES:
        n = _TF_DTYPE_BYTES[m.group(2)]
        for dim in m.group(1).split(","):
            if dim.strip():
                n *= int(dim)
        req["bytes"] = n
    return req


def _tensorflow_devices(tf: Any) -> list[dict[str, int]]:
    # get_memory_info would create the devices (and their memory pools) at
    # exit in a program that never used them: only once it has.
    context = sys.modules.get("tensorflow.python.eager.context")
    current = getattr(context, "context_safe", None)
    ctx = current() if callable(current) else None
    if ctx is None or not getattr(ctx, "_initialized", False):
        return []
    config = tf.config
    physical = config.list_physical_devices("GPU")
    devices = []
    for i, _ in enumerate(config.list_logical_devices("GPU")[:_MAX_DEVICES]):
        info = config.experimental.get_memory_info(f"GPU:{i}")
        entry = {"index": i, "peak_bytes": int(info["peak"])}
        if i < len(physical):
            logical = config.get_logical_device_configuration(physical[i]) or []
            if len(logical) == 1 and getattr(logical[0], "memory_limit", None):
                entry["limit_bytes"] = int(logical[0].memory_limit) << 20
        devices.append(entry)
    return devices


def _read_at_exit(name: str, read: Callable[[], list[dict[str, int]]]) -> None:
    """Read a framework's device figures at exit. Registered as the import
    finishes, so it runs before the atexit handlers the framework registered
    while it was imported, which may tear its runtime down. An exit that
    runs no atexit handler (the hook's stop after --steps, through
    os._exit) reads them in exit_fields instead, the runtime still up."""
    _state.readers[name] = read

    def reader() -> None:
        if os.getpid() != _state.pid:
            return
        _read(name)

    atexit.register(reader)


def _read(name: str) -> None:
    # Once only: after the framework's own atexit handlers have torn its
    # runtime down, asking it again could crash the process.
    if name in _state.read:
        return
    _state.read.add(name)
    try:
        devices = _state.readers[name]()
    except Exception:
        return
    if devices:
        _state.devices[name] = devices


def _read_now() -> None:
    """Read the figures of every framework not read yet."""
    if os.getpid() != _state.pid:
        return
    for name in list(_state.readers):
        _read(name)
