# A trial started early: it prints "imported" once its framework is
# imported, then starts it on the GPU, which waits at batchfit's gate
# (BATCHFIT_GATE_FD), and prints "through" and "done". argv: torch or jax.
# With CPU torch the start raises "not compiled with CUDA" once through.
# The torch program asks for 3 CPU threads first, and prints torch's count
# when imported and once through (1, then 3, under a gate). jax-then-torch
# imports torch once through JAX's gate, and prints torch's thread count.
import sys

if sys.argv[1] == "torch":
    import torch

    torch.set_num_threads(3)
    print("imported", torch.get_num_threads(), flush=True)
    try:
        torch.zeros(1, device="cuda")  # torch's C++ calls torch.cuda._lazy_init
    except Exception as e:  # noqa: BLE001
        print("through:", type(e).__name__, torch.get_num_threads(), flush=True)
    else:
        print("through", torch.get_num_threads(), flush=True)
else:
    import jax

    print("imported", flush=True)
    jax.local_devices()
    print("through", flush=True)
    if sys.argv[1] == "jax-then-torch":
        import torch

        print("torch threads", torch.get_num_threads(), flush=True)
print("done", flush=True)
