"""Where a forked trial's seconds go, and what the imports cost.

Imports torch and torchvision (timed), then forks children that each run a
ResNet-50 training step like the SimCLR example's and time its phases: CUDA's
start, the model's build, the first step (lazy kernel and library loading,
cuDNN's heuristics), the next steps, and the exit (from the child's last mark
to its reaping). Variants:

  plain     the parent holds torch and torchvision only (batchfit's server)
  dlopen    the parent has also loaded the CUDA math libraries' shared objects
            that torch loads only on first use (cuDNN's engines, cuBLASLt),
            without a call into any of them: does the child's first step
            shorten, and does the parent stay free of a GPU runtime?

Prints one JSON line per trial and a table. GPU machine only.
Usage: python3 bench/probes/fork_phases.py [--batch 156] [--reps 3]
"""

import argparse
import ctypes
import glob
import json
import os
import sys
import time

T0 = time.perf_counter()
import torch  # noqa: E402

T1 = time.perf_counter()
import torchvision  # noqa: E402

T2 = time.perf_counter()


def mapped_libs():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if ".so" in path:
                libs.add(os.path.basename(path))
    return libs


def gpu_files():
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/dev/nvidia"):
            out.append(target)
    return out


def threads():
    return len(os.listdir("/proc/self/task"))


def lazy_libs():
    """The CUDA math libraries' shared objects torch has not mapped yet."""
    have = mapped_libs()
    found = []
    roots = {os.path.dirname(os.path.dirname(torch.__file__))}
    for root in roots:
        for pat in ("nvidia/cudnn/lib/libcudnn*.so*", "nvidia/cublas/lib/libcublasLt.so*",
                    "nvidia/cu*/lib/libcudnn*.so*", "nvidia/cu*/lib/libcublasLt.so*"):
            for p in sorted(glob.glob(os.path.join(root, pat))):
                if os.path.basename(p) not in have and p not in found:
                    found.append(p)
    return found


def child(batch, steps, w):
    marks = [("fork", time.perf_counter())]
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    marks.append(("cuda", time.perf_counter()))
    model = torchvision.models.resnet50(num_classes=128).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    torch.cuda.synchronize()
    marks.append(("model", time.perf_counter()))
    x = torch.randn(2 * batch, 3, 224, 224, device="cuda")
    for i in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        marks.append((f"step{i + 1}", time.perf_counter()))
    os.write(w, (json.dumps(marks) + "\n").encode())
    os._exit(0)


def forked(batch, steps):
    r, w = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            child(batch, steps, w)
        finally:
            os._exit(1)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    end = time.perf_counter()
    marks = json.loads(data) if data else []
    phases = {}
    prev = start
    for name, t in marks:
        phases[name] = round(t - prev, 3)
        prev = t
    phases["exit"] = round(end - prev, 3)
    phases["total"] = round(end - start, 3)
    phases["status"] = status
    return phases


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=156)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=2)
    a = p.parse_args()
    print(json.dumps({"import_torch": round(T1 - T0, 3), "import_torchvision": round(T2 - T1, 3),
                      "threads": threads(), "gpu_files": gpu_files(),
                      "cuda_initialized": torch.cuda.is_initialized()}), flush=True)
    rows = []
    for rep in range(a.reps):
        rows.append(("plain", forked(a.batch, a.steps)))
        print(json.dumps({"variant": "plain", **rows[-1][1]}), flush=True)
    libs = lazy_libs()
    t = time.perf_counter()
    loaded, failed = [], []
    for lib in libs:
        try:
            ctypes.CDLL(lib)
            loaded.append(os.path.basename(lib))
        except OSError as e:
            failed.append(f"{os.path.basename(lib)}: {e}")
    print(json.dumps({"dlopen_seconds": round(time.perf_counter() - t, 3), "loaded": loaded, "failed": failed,
                      "threads": threads(), "gpu_files": gpu_files(),
                      "cuda_initialized": torch.cuda.is_initialized()}), flush=True)
    for rep in range(a.reps):
        rows.append(("dlopen", forked(a.batch, a.steps)))
        print(json.dumps({"variant": "dlopen", **rows[-1][1]}), flush=True)
    names = [k for k in rows[0][1] if k != "status"]
    print("variant " + " ".join(f"{n:>7}" for n in names))
    for v, ph in rows:
        print(f"{v:7} " + " ".join(f"{ph.get(n, 0):7.3f}" for n in names))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
