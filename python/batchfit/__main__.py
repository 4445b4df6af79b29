"""``python -m batchfit ARGS`` runs the batchfit binary with ARGS, in place of
this interpreter (exec: its exit status, signals and terminal are the
binary's)."""

from __future__ import annotations

import os
import sys

from batchfit.binary import find


def main() -> None:
    try:
        exe = find()
    except FileNotFoundError as e:
        print(f"batchfit: error: {e}", file=sys.stderr)
        sys.exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
