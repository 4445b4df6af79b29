# Trains with the stand-in jax (testdata/fakejax): holds 100 MiB of weights,
# then a batch of 300 MiB on a pool of 768 MiB (1 GiB at the default 75 %),
# and ends as the mode says.
import sys

import jax

MIB = 1 << 20
mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if mode == "import-only":
    sys.exit(0)
jax.allocate(100 * MIB)
jax.allocate(300 * MIB)
jax.free(300 * MIB)
if mode == "oom":
    jax.allocate(2000 * MIB)
if mode.startswith("caught"):
    # A batch-size loop that halves on OOM, as training libraries do.
    for size in (2000, 1000, 500):
        try:
            jax.allocate(size * MIB)
            break
        except jax.errors.JaxRuntimeError as e:
            if "RESOURCE_EXHAUSTED" not in str(e):
                raise
    print("fitted", size)
    if mode == "caught-exit3":
        sys.exit(3)
if mode == "chained":
    try:
        jax.allocate(2000 * MIB)
    except jax.errors.JaxRuntimeError as e:
        raise ValueError("step failed") from e
