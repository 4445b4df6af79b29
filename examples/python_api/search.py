"""batchfit's Python API on the simulated GPU: no GPU needed.

    python examples/python_api/search.py                 # batchfit.demo()
    python examples/python_api/search.py -- python train.py --batch-size {}   # a real search

With the wheel installed the binary is found by itself; from a checkout, set
BATCHFIT_BINARY (go build -o /tmp/batchfit ./cmd/batchfit) and
PYTHONPATH=python.
"""

from __future__ import annotations

import sys

import batchfit


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["--"] and len(argv) > 1:
            result = batchfit.search(argv[1:], margin=0.05)
        else:
            result = batchfit.demo(no_db=True)
    except batchfit.BatchfitError as e:
        print(f"batchfit failed (exit {e.exit_code}): {e}", file=sys.stderr)
        if e.result is not None:
            print(f"{len(e.result.trials)} trials ran; the last: {e.result.trials[-1]}", file=sys.stderr)
        return 1

    print(repr(result))
    ok, failed = result.proof or (None, None)
    print(f"answer: {result.answer}")
    if ok and failed:
        print(f"proof: trial {ok.n} ran {ok.batch_size}, trial {failed.n} failed at {failed.batch_size} ({failed.outcome})")
    if result.recommended:
        print(f"recommended for throughput: {result.recommended}")
    print("trials:")
    for t in sorted(result.trials, key=lambda t: t.n):
        # A trial that ran by its peak, one too large by what it needed at
        # least: the figures batchfit's own summary shows.
        if t.needed:
            peak = f"> {t.needed / 2**30:.2f} GiB ({t.needed_basis})"
        else:
            top = max(t.peaks.allocated or 0, t.peaks.device or 0)
            peak = f"{top / 2**30:6.2f} GiB" if top else "      -"
        speed = f"{t.samples_per_second:8.1f} samples/s" if t.samples_per_second else ""
        print(f"  {t.n:3d}  batch {t.batch_size:6d}  {t.outcome:10s} {peak} {speed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
