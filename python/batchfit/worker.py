"""batchfit's warm PyTorch worker, under its public name: python -m
batchfit.worker MODULE:ATTR. The code, and the protocol it speaks, live in
batchfit._runtime.worker."""

import sys

from batchfit._runtime.worker import (
    DEFAULT_STEPS,
    FDS_ENV,
    PROTOCOL_VERSION,
    WARMUP_ENV,
    WARMUP_STEPS_ENV,
    Channel,
    Worker,
    main,
    once,
    serve,
)

__all__ = [
    "DEFAULT_STEPS", "FDS_ENV", "PROTOCOL_VERSION", "WARMUP_ENV", "WARMUP_STEPS_ENV",
    "Channel", "Worker", "main", "once", "serve",
]

if __name__ == "__main__":
    sys.exit(main())
