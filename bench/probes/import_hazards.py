"""Which packages make a fork server unsafe, and what each import costs: for
each module named, a fresh interpreter imports it (after the ones before it
in its group, as a fork server would) and reports the seconds and
batchfit's fork hazard (python/batchfit/_runtime/forkserver.py) after each import.

    python3 bench/probes/import_hazards.py torch,torchvision,lightning torch,transformers
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = r"""
import importlib, json, sys, time
from batchfit.forkserver import fork_hazard, thread_count
for name in sys.argv[1:]:
    t = time.monotonic()
    try:
        importlib.import_module(name)
        err = None
    except BaseException as e:
        err = f"{type(e).__name__}: {e}"
    print(json.dumps({"module": name, "seconds": round(time.monotonic() - t, 2), "error": err,
                      "threads": thread_count(), "hazard": fork_hazard()}), flush=True)
"""

for group in sys.argv[1:]:
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
    out = subprocess.run([sys.executable, "-c", PROBE] + group.split(","), capture_output=True, text=True, env=env)
    print(f"== {group} (exit {out.returncode})")
    for line in out.stdout.splitlines():
        print(line)
    if out.returncode:
        print(out.stderr[-1500:])
