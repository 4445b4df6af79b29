# Runs out of memory with the stand-in torch (testdata/faketorch): CUDA starts
# mid-program, as on the first CUDA call; torch's C++ then catches one
# refused allocation itself (as cuDNN's workspace search does), and the mode
# says what happens to the next one, of 2 GiB.
import sys

import torch

mode = sys.argv[1]
torch.cuda.init()
torch.cuda.fake_alloc(512 << 20, caught_inside=True)
if mode == "uncaught":
    torch.cuda.fake_alloc(2 << 30)
if mode.startswith("caught"):
    try:
        torch.cuda.fake_alloc(2 << 30)
    except torch.OutOfMemoryError:
        print("skipped a batch")
print("attached before init:", torch._C.attached_before_init)
if mode == "caught-exit3":
    sys.exit(3)
