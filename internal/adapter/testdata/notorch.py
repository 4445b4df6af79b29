# A program that never imports torch (nor jax, nor tensorflow). It reports,
# from its own atexit handler (which runs before the hook's), whether anything
# imported them, and can end in the ways the hook must tell apart. "probe"
# looks for each the way libraries check that one is installed.
import atexit
import importlib.util
import os
import sys


def at_exit():
    print("torch imported:", "torch" in sys.modules)
    print("jax imported:", "jax" in sys.modules)
    print("tensorflow imported:", "tensorflow" in sys.modules)
    print("hook loaded:", "batchfit.hook" in sys.modules)


atexit.register(at_exit)
mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
print("hello from notorch", mode)
if mode == "raise":
    raise ValueError("boom\nsecond line")
if mode == "own-excepthook":
    # A program that installs its own excepthook, not chaining ours.
    sys.excepthook = lambda t, v, tb: print("own hook:", v)
    raise KeyError("lost")
if mode == "probe":
    for name in ("torch", "jax", "tensorflow"):
        print(name, "installed:", importlib.util.find_spec(name) is not None)
if mode == "exit3":
    sys.exit(3)
if mode == "fork":
    pid = os.fork()
    if pid == 0:
        # A child that exits normally runs the inherited atexit handlers.
        sys.exit(0)
    os.waitpid(pid, 0)
