# Ends on a torch CUDA out-of-memory error without a GPU: raised directly
# ("uncaught"), or caught and re-raised as another exception from it
# ("chained"), as training frameworks often do, or caught and survived
# ("caught"), as batch-size finders do.
import sys

import torch

MESSAGE = "CUDA out of memory. Tried to allocate 2.00 GiB"


def train():
    raise torch.cuda.OutOfMemoryError(MESSAGE)


if sys.argv[1] == "uncaught":
    train()
elif sys.argv[1] == "chained":
    try:
        train()
    except torch.cuda.OutOfMemoryError as e:
        raise RuntimeError("training failed") from e
elif sys.argv[1] == "caught":
    # As a batch-size finder does: catch it, go on at a smaller size.
    try:
        train()
    except torch.cuda.OutOfMemoryError:
        pass
