# A trial program that imports nothing of its own and shows what it holds
# as it starts: which of the modules its arguments name are in sys.modules
# (a forked trial has what its server preloaded), which process imported
# each (its IMPORTED_BY), and its threads. With "hang" last it then sleeps.
import json
import os
import sys
import threading

names = [n for n in sys.argv[1:] if n != "hang"]
print(json.dumps({
    "pid": os.getpid(),
    "modules": {n: n in sys.modules for n in names},
    "imported_by": {n: getattr(sys.modules.get(n), "IMPORTED_BY", 0) for n in names},
    "threads": len(os.listdir("/proc/self/task")),
    "python_threads": threading.active_count(),
}), flush=True)
if sys.argv[-1] == "hang":
    import time

    time.sleep(3600)
