"""One JSON object per line over a pipe: how the warm worker and the fork
server answer batchfit (on fd 4)."""

from __future__ import annotations

import json
import os
from typing import Any


def write_line(fd: int, msg: Any) -> None:
    """Write msg as one line of strict JSON (no NaN, which Go's decoder
    refuses), all of it: a pipe may take a long line in parts."""
    data = (json.dumps(msg, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
