"""Prints one line for a batchfit --json document (docs/json.md): status,
answer, first failure, trials (forked), seconds, and the trials in order
(size, x for out of memory, f for forked), the GPUs trials ran on and the
conflicts (non_monotonic): the trial sequences of bench/results and of
bench/gpu_examples.sh's table.

    python3 bench/record_line.py run.json
"""

import json
import sys


def line(path):
    try:
        doc = json.load(open(path))
    except (OSError, ValueError) as e:
        return f"no record ({e})"
    err = doc.get("error")
    if isinstance(err, dict):
        return f"error: {err.get('message')}"
    if err:  # not a batchfit record: a bisection's (bench/fresh_bisect.py)
        return f"error: {str(err)[:300]}"
    runs = doc.get("runs") or []
    if not runs:
        return "no run"
    r = runs[0]
    ts = r.get("trials") or []
    seq = " ".join(f"{t['batch_size']}{'x' if t['outcome'] != 'ok' else ''}{'f' if t.get('forked') else ''}" for t in ts)
    gpus = sorted({g for t in ts for g in t.get("gpus") or []})
    seq += f" | gpus {gpus}"
    if r.get("flaky"):
        seq += " | flaky: " + ", ".join(f"{f['batch_size']} ran {f['ok']} failed {f['failed']}" for f in r["flaky"])
    if r.get("at_risk"):
        a = r["at_risk"]
        seq += f" | at risk from {a['batch_size']} by {a['from_size']}'s failure"
    for c in r.get("non_monotonic") or []:
        seq += f" | non-monotonic: {c.get('fail_size')} failed below {c.get('ok_size')}"
    rec = r.get("throughput") or {}
    extra = f" throughput {json.dumps(rec)[:300]}" if rec else ""
    return (f"status {r.get('status')} answer {r.get('answer')} first_failure {r.get('first_failure')} "
            f"trials {len(ts)} forked {sum(1 for t in ts if t.get('forked'))} seconds {r.get('seconds') or 0:.1f}: {seq}{extra}")


if __name__ == "__main__":
    print(line(sys.argv[1]))
