# A stand-in for jax with the few things batchfit's hook uses: local devices
# with memory_stats(), the backend registry, and XlaRuntimeError raised as
# RESOURCE_EXHAUSTED when an allocation does not fit the pool. The pool is
# FAKE_JAX_TOTAL bytes (default 1 GiB) times the XLA memory fraction (0.75
# by default; both fraction variables at once are refused, as newer jaxlib
# does). FAKE_JAX_DEVICES devices (default 1); FAKE_JAX_CPU=1 makes them CPU
# devices, whose memory_stats() is None.
import atexit
import os

from jax import errors  # noqa: F401
from jax._src import xla_bridge
from jaxlib.xla_extension import XlaRuntimeError


class Device:
    def __init__(self, index, limit):
        self.id = index
        self.limit = limit
        self.in_use = 0
        self.peak = 0
        self.preallocate = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true") != "false"

    def memory_stats(self):
        if os.environ.get("FAKE_JAX_CPU") == "1":
            return None
        pool = self.limit if self.preallocate else self.peak
        return {"bytes_in_use": self.in_use, "peak_bytes_in_use": self.peak, "bytes_limit": self.limit, "pool_bytes": pool}


def _start():
    return xla_bridge.backends()["gpu"]


def _make_backends():
    if xla_bridge._backends:
        return xla_bridge._backends
    a = os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
    b = os.environ.get("XLA_CLIENT_MEM_FRACTION")
    if a is not None and b is not None:
        raise RuntimeError("XLA_CLIENT_MEM_FRACTION and XLA_PYTHON_CLIENT_MEM_FRACTION are both set")
    fraction = float(a if a is not None else b if b is not None else 0.75)
    total = int(os.environ.get("FAKE_JAX_TOTAL", str(1 << 30)))
    n = int(os.environ.get("FAKE_JAX_DEVICES", "1"))
    xla_bridge._backends["gpu"] = [Device(i, int(total * fraction)) for i in range(n)]
    return xla_bridge._backends


def local_devices():
    return list(_start())


def allocate(nbytes, device=0):
    """Hold nbytes on a device for the rest of the program, as a live array."""
    d = _start()[device]
    if d.in_use + nbytes > d.limit:
        raise XlaRuntimeError(
            f"RESOURCE_EXHAUSTED: Out of memory while trying to allocate {nbytes} bytes.\n"
            "BufferAssignment OOM Debugging."
        )
    d.in_use += nbytes
    d.peak = max(d.peak, d.in_use)


def free(nbytes, device=0):
    _start()[device].in_use -= nbytes


def _shutdown():
    # Registered as jax is imported: it runs after the program's and the
    # hook's later handlers. It tears the backends down, as a runtime may.
    print("backend started:", xla_bridge.backends_are_initialized())
    xla_bridge._backends.clear()


atexit.register(_shutdown)
