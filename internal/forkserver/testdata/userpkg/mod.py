import json
import os
import sys

import heavy  # noqa: F401

print(json.dumps({"argv": sys.argv, "name": __name__, "spec": __spec__.name, "path0": sys.path[0],
                  "cwd": os.getcwd(), "file": __file__}, sort_keys=True))
