"""Does torch read PYTORCH_CUDA_ALLOC_CONF when CUDA starts, or when torch
is imported? A fork server imports torch before the trial's environment is
known; the allocator cap can be a per-trial variable only if torch reads it
when CUDA starts. Each mode sets a cap of FRACTION of the card after
`import torch` and then asks for more than the cap:

    after-import  in this process
    fork          in a child forked after the import (as the fork server's)
    before-import control: the variable set before the import

One JSON line per mode: whether the cap held (the allocation failed), and
the fraction torch reports (torch.cuda.get_per_process_memory_fraction).

    python3 bench/probes/alloc_conf_lazy.py [after-import|fork|before-import]
"""

import json
import os
import subprocess
import sys

FRACTION = 0.05


def attempt(mode):
    import torch  # noqa: the point is what the import reads

    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = f"per_process_memory_fraction:{FRACTION}"
    total = torch.cuda.get_device_properties(0).total_memory
    try:
        x = torch.empty(int(total * FRACTION * 2), dtype=torch.uint8, device="cuda")
        held = False
        del x
    except torch.OutOfMemoryError:
        held = True
    getf = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    return {"mode": mode, "cap_held": held, "fraction_reported": getf(0) if getf else None, "torch": torch.__version__}


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "all"
    if mode == "all":
        for m in ("before-import", "after-import", "fork"):
            subprocess.run([sys.executable, __file__, m], check=False)
        return
    if mode == "before-import":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = f"per_process_memory_fraction:{FRACTION}"
        print(json.dumps(attempt(mode)), flush=True)
    elif mode == "after-import":
        print(json.dumps(attempt(mode)), flush=True)
    elif mode == "fork":
        import torch  # noqa: imported in the parent, CUDA not started

        pid = os.fork()
        if pid == 0:
            print(json.dumps(attempt(mode)), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
