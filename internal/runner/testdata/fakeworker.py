"""A warm worker without torch that plays the runner tests' fakeTrainer: a
trial's peak is FAKE_FIXED + size * FAKE_PER_SAMPLE bytes, and sizes above
FAKE_FITS run out of memory. Its resets always verify. Fresh trials of the
same command never run it: the tests' executor plays them."""

import json
import os

r, w = [int(x) for x in os.environ["BATCHFIT_WORKER_FDS"].split(",")]
fixed, per_sample = int(os.environ["FAKE_FIXED"]), int(os.environ["FAKE_PER_SAMPLE"])
fits = int(os.environ["FAKE_FITS"])


def send(msg):
    os.write(w, (json.dumps(msg) + "\n").encode())


send({"type": "hello", "version": 1, "pid": os.getpid(), "torch": "0.0-fake", "cuda": True,
      "device": "Fake GPU", "device_total": 80 << 30, "verify": "cuda_allocated",
      "baseline_allocated": fixed, "baseline_reserved": fixed})
for line in os.fdopen(r, "rb"):
    msg = json.loads(line)
    if msg["type"] != "trial":
        break
    size = msg["batch_size"]
    peak = fixed + size * per_sample
    reply = {"type": "result", "id": msg["id"], "outcome": "ok", "peak_allocated": peak, "peak_reserved": peak,
             "step_seconds": [0.1] * msg["steps"], "retained_bytes": 0, "allocated_after": fixed,
             "reserved_after": fixed, "verified": True}
    if size > fits:
        reply.update(outcome="oom", exception="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    send(reply)
