# A trial program that shows how it was started, then ends as its first
# argument says.
import json
import os
import subprocess
import sys
import time

import heavy  # noqa: F401  (third-party: preloaded by the fork server)


def show():
    main = sys.modules["__main__"]
    return {
        "argv": sys.argv,
        "name": __name__,
        "file": globals().get("__file__"),
        "spec": repr(globals().get("__spec__")),
        "main_is_me": main.__dict__ is globals(),
        "cwd": os.getcwd(),
        "path0": sys.path[0],
        "path": sys.path[1:],
        "executable": sys.executable,
        "size": os.environ.get("BATCHFIT_BATCH_SIZE"),
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "xla_fraction": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),
        "stdin": sys.stdin.read(),
        "pgrp": os.getpgrp() == os.getpid(),
    }


if __name__ == "__main__":
    print(json.dumps(show(), sort_keys=True), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "exit3":
        sys.exit(3)
    if mode == "message":
        sys.exit("bye")
    if mode == "raise":
        raise ValueError("boom")
    if mode == "atexit":
        import atexit

        atexit.register(lambda: print("atexit ran", flush=True))
    if mode == "hang":
        time.sleep(3600)
    if mode == "orphan":
        # A grandchild in a session of its own that outlives the trial.
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True)
        print("spawned", flush=True)
