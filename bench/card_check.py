"""The strict check of an answer: run a command plainly at given batch sizes
on a real smaller card, made by holding all but --card of the GPU's memory
in another process for as long as the check runs.

Each size runs in a fresh process with the user's environment (CUDA_VISIBLE_DEVICES
pinned to --gpu); it fits when it exits 0, does not when its output names an
out-of-memory error, and anything else is a crash. The table gives every run;
the verdict says whether answer ran every time and answer + 1 never did.

    python3 bench/card_check.py --card 24GiB --answer 276 --repeat 2 \\
        -- python3 examples/simclr_resnet50/train.py --batch-size {}

A JAX program gets jaxlib's pool as the named card would give it (its default
75 % of the card, or the fraction the command's environment sets) through
XLA_PYTHON_CLIENT_MEM_FRACTION, as a share of this GPU: on the held GPU a
default pool would be 75 % of the whole GPU and could not be taken (--jax).
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

OOM_TEXTS = ("RESOURCE_EXHAUSTED", "out of memory", "Out of memory", "OutOfMemoryError",
             "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED")
GIB = 1 << 30


def size_of(text):
    t = text.strip().lower()
    for unit, mult in (("gib", GIB), ("gb", GIB), ("mib", 1 << 20), ("mb", 1 << 20)):
        if t.endswith(unit):
            return int(float(t[: -len(unit)]) * mult)
    raise SystemExit(f"card_check: --card {text!r}: give a size such as 24GiB")


class Holder:
    """All but `leave` bytes of device `gpu`, held through the CUDA driver API."""

    def __init__(self, gpu, leave):
        cuda = ctypes.CDLL("libcuda.so.1")
        self.cuda = cuda
        check = self.check
        check(cuda.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        check(cuda.cuDeviceGet(ctypes.byref(dev), gpu), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "cuDevicePrimaryCtxRetain")
        check(cuda.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.blocks = []
        for _ in range(8):
            free, total = self.info()
            self.total = total
            if abs(free - leave) <= 4 << 20:
                break
            if free < leave:
                raise SystemExit(f"card_check: {free / GIB:.2f} GiB free, less than {leave / GIB:.2f} GiB")
            ptr = ctypes.c_uint64()
            want = free - leave
            check(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(want)), f"cuMemAlloc {want}")
            self.blocks.append(ptr)
        self.free = self.info()[0]

    def info(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.check(self.cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        return free.value, total.value

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise SystemExit(f"card_check: {what}: CUDA error {rc}")


def run(cmd, size, env, timeout):
    argv = [a.replace("{}", str(size)) for a in cmd]
    start = time.time()
    try:
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        out, code = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, code = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace"), None
    secs = time.time() - start
    if code == 0:
        return "ok", secs, ""
    if any(t in out for t in OOM_TEXTS):
        return "oom", secs, ""
    return "crash" if code is not None else "timeout", secs, out[-2000:]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--card", required=True, help="the card's memory, e.g. 24GiB")
    p.add_argument("--answer", type=int, required=True, help="batchfit's answer: it and the size above run")
    p.add_argument("--sizes", help="other sizes to run, comma-separated")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--jax", action="store_true", help="size XLA's pool as the card would (see above)")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--json", help="write the runs here")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    leave = size_of(a.card)
    holder = Holder(a.gpu, leave)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(a.gpu))
    if a.jax:
        frac = float(env.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = repr(frac * leave / holder.total)
    print(f"held: {holder.free / GIB:.3f} GiB free of {holder.total / GIB:.2f} GiB on gpu {a.gpu}", flush=True)
    sizes = [a.answer, a.answer + 1] + [int(s) for s in (a.sizes or "").split(",") if s]
    runs = []
    for size in sizes:
        for _ in range(a.repeat):
            outcome, secs, tail = run(cmd, size, env, a.timeout)
            runs.append({"size": size, "outcome": outcome, "seconds": round(secs, 1)})
            print(f"{size:>7} {outcome:>8} {secs:7.1f}s", flush=True)
            if tail:
                print(tail, file=sys.stderr)
    ran = all(r["outcome"] == "ok" for r in runs if r["size"] == a.answer)
    above = all(r["outcome"] == "oom" for r in runs if r["size"] == a.answer + 1)
    verdict = "exact" if ran and above else ("too high" if not ran else "too low")
    print(f"verdict: {verdict} ({a.answer} {'ran' if ran else 'failed'}, {a.answer + 1} {'failed' if above else 'ran'})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"card": a.card, "answer": a.answer, "verdict": verdict, "runs": runs}, f, indent=1)
    return 0 if verdict == "exact" else 1


if __name__ == "__main__":
    sys.exit(main())
