"""The reference batchfit's benches compare with: the largest batch size a
command runs at, found without batchfit by running every size in a fresh
process and bisecting on the exit status.

The command's "{}" is replaced by the batch size. Sizes double from --start
until one fails (or halve until one runs), then the bracket is bisected. Exit
status 0 means the size fits; a failure counts as "does not fit" only when its
output names an out-of-memory error, since a crash is no boundary: anything
else stops the search with the trial's stderr.

    python3 bench/fresh_bisect.py --json out.json --start 32 \\
        --env XLA_PYTHON_CLIENT_MEM_FRACTION=0.17 --unset XLA_CLIENT_MEM_FRACTION \\
        -- python3 examples/jax_optax/train.py --batch-size {} --steps 3
"""

import argparse
import json
import os
import subprocess
import sys
import time

# cuBLAS and cuDNN say so in their own words when the memory for a handle or
# a workspace is not there (Lightning on the whole card at 11672, cublasCreate:
# bench/results/not-monotone-h200.txt).
OOM_TEXTS = ("RESOURCE_EXHAUSTED", "out of memory", "Out of memory", "OutOfMemoryError",
             "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", required=True, help="write the result here")
    p.add_argument("--log-dir", help="keep every trial's stdout and stderr here")
    p.add_argument("--start", type=int, default=32)
    p.add_argument("--min", type=int, default=1)
    p.add_argument("--max", type=int, default=65536)
    p.add_argument("--timeout", type=float, default=600, help="seconds per trial")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="set in every trial")
    p.add_argument("--unset", action="append", default=[], metavar="K", help="remove from every trial's environment")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if "{}" not in args.command:
        p.error('the command needs a "{}" for the batch size')
    if not args.min <= args.start <= args.max:
        p.error("need --min <= --start <= --max")
    return args


class Bisection:
    def __init__(self, args):
        self.args = args
        self.env = {k: v for k, v in os.environ.items() if k not in args.unset}
        self.env.update(kv.split("=", 1) for kv in args.env)
        self.trials = []

    def fits(self, size):
        """Runs one trial; True if it ran, False if it ran out of memory."""
        command = [str(size) if a == "{}" else a for a in self.args.command]
        start = time.monotonic()
        try:
            done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=self.args.timeout)
            code, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as e:
            # TimeoutExpired holds bytes, whatever text=True says.
            code, stdout, stderr = None, (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(errors="replace")
        seconds = time.monotonic() - start
        if code == 0:
            outcome = "ok"
        elif code is not None and any(t in stdout + stderr for t in OOM_TEXTS):
            outcome = "oom"
        else:
            outcome = "timeout" if code is None else "crash"
        n = len(self.trials) + 1
        self.trials.append(dict(n=n, batch_size=size, outcome=outcome, exit_code=code, seconds=round(seconds, 2),
                                stderr_tail=stderr[-1500:] if outcome != "ok" else ""))
        if self.args.log_dir:
            os.makedirs(self.args.log_dir, exist_ok=True)
            for name, text in (("stdout", stdout), ("stderr", stderr)):
                with open(os.path.join(self.args.log_dir, f"{n:02d}-{size}.{name}"), "w") as f:
                    f.write(text)
        print(f"fresh_bisect: trial {n} batch {size}: {outcome} ({seconds:.1f}s)", file=sys.stderr, flush=True)
        if outcome in ("crash", "timeout"):
            raise RuntimeError(f"batch {size}: {outcome} (exit {code}), which is not running out of memory:\n"
                               f"{stderr[-1500:]}")
        return outcome == "ok"

    def search(self):
        """Returns (largest size that ran, smallest that did not); None where
        there is none in [min, max]."""
        a = self.args
        ok, bad = None, None
        if self.fits(a.start):
            ok = a.start
            while bad is None and ok < a.max:
                size = min(ok * 2, a.max)
                if self.fits(size):
                    ok = size
                else:
                    bad = size
        else:
            bad = a.start
            while ok is None and bad > a.min:
                size = max(bad // 2, a.min)
                if self.fits(size):
                    ok = size
                else:
                    bad = size
        if ok is None or bad is None:
            return ok, bad
        while bad - ok > 1:
            mid = (ok + bad) // 2
            if self.fits(mid):
                ok = mid
            else:
                bad = mid
        return ok, bad


def main(argv=None):
    args = parse_args(argv)
    bisection = Bisection(args)
    start = time.monotonic()
    result = dict(command=args.command, env=dict(kv.split("=", 1) for kv in args.env), unset=args.unset)
    try:
        answer, first_failure = bisection.search()
        result.update(answer=answer or 0, first_failure=first_failure, error=None)
    except RuntimeError as e:
        result.update(answer=0, first_failure=None, error=str(e))
    result.update(trials=bisection.trials, seconds=round(time.monotonic() - start, 1))
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    if result["error"]:
        print(f"fresh_bisect: error: {result['error']}", file=sys.stderr)
        return 1
    print(result["answer"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
