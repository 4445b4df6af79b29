"""A worker without torch, for protocol and policy tests. FAKE_MODE says how
it misbehaves:

ok        answers every trial: oom above FAKE_OOM_ABOVE (default never),
          retained_bytes FAKE_RETAIN (default 0) per trial, cumulative
garbage   answers a trial with a line that is not JSON
wrongid   answers a trial with another trial's id
noverify  answers without the verified field
die       exits (status 7) when a trial arrives, after writing to stderr
hang      never answers a trial
nohello   never says hello
fatal     reports a setup failure and exits 1
exitearly exits 0 before its hello
version   says hello with protocol version 99

FAKE_CHILD, when set, names a file: the worker starts a child process
(sleep) in its group and writes the child's pid there.

Every trial is appended to FAKE_LOG (one line "pid size") when it is set.
"""

import json
import os
import sys
import time

mode = os.environ.get("FAKE_MODE", "ok")
r, w = [int(x) for x in os.environ["BATCHFIT_WORKER_FDS"].split(",")]
inp = os.fdopen(r, "rb")


def send(obj, raw=None):
    data = raw if raw is not None else (json.dumps(obj) + "\n").encode()
    os.write(w, data)


if os.environ.get("FAKE_CHILD"):
    import subprocess

    child = subprocess.Popen(["sleep", "3600"])
    with open(os.environ["FAKE_CHILD"], "w") as f:
        f.write(str(child.pid))

if mode == "nohello":
    time.sleep(3600)
if mode == "exitearly":
    sys.exit(0)
if mode == "fatal":
    sys.stderr.write("Traceback ...\nValueError: cannot read the dataset config\n")
    send({"type": "fatal", "stage": "setup", "exception": "ValueError: cannot read the dataset config",
          "traceback": "Traceback ...\nValueError: cannot read the dataset config\n"})
    sys.exit(1)

send({"type": "hello", "version": 99 if mode == "version" else 1, "pid": os.getpid(), "torch": "0.0-fake",
      "cuda": True, "device": "Fake GPU", "device_total": 1 << 34, "verify": "cuda_allocated",
      "baseline_allocated": 1000, "baseline_reserved": 2 << 20})

oom_above = int(os.environ.get("FAKE_OOM_ABOVE", "0")) or None
retain = int(os.environ.get("FAKE_RETAIN", "0"))
retained = 0
for line in inp:
    msg = json.loads(line)
    if msg["type"] == "exit":
        break
    if msg["type"] != "trial":
        send({"type": "error", "error": "unknown message type %r" % msg["type"]})
        continue
    size = msg["batch_size"]
    if os.environ.get("FAKE_LOG"):
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write("%d %d\n" % (os.getpid(), size))
    if mode == "garbage":
        send(None, raw=b"Epoch 1: loss 0.25\n")
        continue
    if mode == "die":
        sys.stderr.write("fakeworker: segfault coming\n")
        sys.stderr.flush()
        os._exit(7)
    if mode == "hang":
        time.sleep(3600)
    reply = {"type": "result", "id": msg["id"] + (1 if mode == "wrongid" else 0), "outcome": "ok",
             "peak_allocated": 1000 + size * 1000, "peak_reserved": 2 * (1000 + size * 1000),
             "step_seconds": [0.01] * msg.get("steps", 1)}
    if oom_above is not None and size > oom_above:
        reply["outcome"] = "oom"
        reply["exception"] = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"
    retained += retain
    reply["retained_bytes"] = retained
    reply["allocated_after"] = 1000 + retained
    reply["reserved_after"] = 2 << 20
    if mode != "noverify":
        reply["verified"] = retained == 0
    send(reply)
