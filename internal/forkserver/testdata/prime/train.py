"""A trial program whose imports the fork server guesses from this file
before the first trial runs: marked (third-party), mine and shadow (its own,
shadow also the name of a third-party package), and with "indirect" helper,
its own module that imports the third-party indirect. It prints who
imported what."""
import json
import os
import sys

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

indirect = sys.modules.get("indirect")
print(json.dumps({"pid": os.getpid(), "marked": marked.IMPORTED_BY, "mine": mine.IMPORTED_BY,
                  "shadow": shadow.WHERE, "indirect": getattr(indirect, "IMPORTED_BY", None)}))
