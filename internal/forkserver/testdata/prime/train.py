"""A trial program whose imports the fork server guesses from this file
before the first trial ends: marked (third-party), mine and shadow (its own,
shadow also the name of a third-party package), and with "indirect" helper,
its own module that imports the third-party indirect.

With "wait" it ends only once another process (the fork server) imported
marked; then it prints who imported what."""
import json
import os
import sys
import time

import marked
import mine
import shadow  # the program's own, beside it

try:
    import broken  # noqa: F401  (third-party, fails to import)
except ImportError:
    pass

# from . import nothing: a relative import, never a candidate
if "indirect" in sys.argv[1:]:
    import helper  # noqa: F401

if "wait" in sys.argv[1:]:
    deadline = time.time() + 30
    while True:
        with open(os.environ["PRIME_MARKS"]) as f:
            if any(line.split()[0] == "marked" and int(line.split()[1]) != os.getpid() for line in f):
                break
        if time.time() > deadline:
            sys.exit("no other process imported marked")
        time.sleep(0.05)

indirect = sys.modules.get("indirect")
print(json.dumps({"pid": os.getpid(), "marked": marked.IMPORTED_BY, "mine": mine.IMPORTED_BY,
                  "shadow": shadow.WHERE, "indirect": getattr(indirect, "IMPORTED_BY", None)}))
