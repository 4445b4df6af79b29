"""What pool jaxlib takes when the program sets no fraction: its
bytes_limit against CUDA's total and free memory, on the GPU as it is (run
it on a held one too: bench/card_check.py's holder). Backs
adapter.JAXDefaultFraction: the pool is 75 % of the card's total, not of
its free memory."""

import ctypes
import json
import os

cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuInit(0)
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
cuda.cuDeviceGet(ctypes.byref(dev), 0)
cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
cuda.cuCtxSetCurrent(ctx)
free, total = ctypes.c_size_t(), ctypes.c_size_t()
cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
cuda.cuDevicePrimaryCtxRelease_v2(dev)

import jax  # noqa: E402  (after the driver's own figures)
import jax.numpy as jnp  # noqa: E402

out = {"jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else jax.__version__,
       "env": {k: v for k, v in os.environ.items() if k.startswith("XLA_")},
       "cuda_total": total.value, "cuda_free_before": free.value}
try:
    jnp.ones(1).block_until_ready()
    stats = jax.devices()[0].memory_stats()
    out["bytes_limit"] = stats.get("bytes_limit")
    out["share_of_total"] = stats.get("bytes_limit", 0) / total.value
    out["share_of_free"] = stats.get("bytes_limit", 0) / free.value
except Exception as e:  # noqa: BLE001  (the failure is the finding)
    out["error"] = str(e)[:500]
print(json.dumps(out))
