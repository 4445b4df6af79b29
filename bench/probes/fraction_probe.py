"""Runs a Python training script under one of PyTorch's two memory caps and
prints what the caching allocator saw, to compare them:

    env  PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:F (set by the caller)
    api  torch.cuda.set_per_process_memory_fraction(F) before the script runs

    python3 bench/probes/fraction_probe.py api 0.1709 examples/lightning_resnet/train.py fit ...

At exit one JSON line on stderr, starting "fraction_probe:", with the mode,
the fraction the allocator reports, peaks (allocated, reserved), allocator
retries and OOMs, and the process's memory outside the allocator (NVML's
used memory of the device minus reserved, at exit; the GPU must be otherwise
idle). Exit status: the script's.
"""

import atexit
import json
import runpy
import sys

import torch


def report(mode, fraction):
    s = torch.cuda.memory_stats() if torch.cuda.is_initialized() else {}
    out = {"mode": mode, "fraction": fraction,
           "allocator_fraction": getattr(torch.cuda, "get_per_process_memory_fraction", lambda: None)()
           if torch.cuda.is_initialized() else None,
           "peak_allocated": s.get("allocated_bytes.all.peak"), "peak_reserved": s.get("reserved_bytes.all.peak"),
           "retries": s.get("num_alloc_retries"), "ooms": s.get("num_ooms")}
    if torch.cuda.is_initialized():
        free, total = torch.cuda.mem_get_info()
        out["device_used"] = total - free
        out["outside_allocator"] = total - free - torch.cuda.memory_reserved()
        out["total"] = total
    print("fraction_probe: " + json.dumps(out), file=sys.stderr, flush=True)


def main():
    mode, fraction, script, args = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4:]
    if mode == "api":
        torch.cuda.set_per_process_memory_fraction(fraction)
    atexit.register(report, mode, fraction)
    sys.argv = [script] + args
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
