# A trial started early: it prints "imported" once its framework is
# imported, then starts it on the GPU, which waits at batchfit's gate
# (BATCHFIT_GATE_FD), and prints "through" and "done". argv: torch or jax.
# With CPU torch the start raises "not compiled with CUDA" once through.
import sys

if sys.argv[1] == "torch":
    import torch

    print("imported", flush=True)
    try:
        torch.zeros(1, device="cuda")  # torch's C++ calls torch.cuda._lazy_init
    except Exception as e:  # noqa: BLE001
        print("through:", type(e).__name__, flush=True)
    else:
        print("through", flush=True)
else:
    import jax

    print("imported", flush=True)
    jax.local_devices()
    print("through", flush=True)
print("done", flush=True)
