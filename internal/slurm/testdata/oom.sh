#!/bin/sh
# PyTorch running out of GPU memory (torch 2.x wording), exit status 1.
echo "step 1/3"
cat >&2 <<'MSG'
Traceback (most recent call last):
  File "/work/train.py", line 88, in <module>
    loss = model(batch).sum()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB memory in use. Of the allocated memory 76.50 GiB is allocated by PyTorch, and 1.10 GiB is reserved by PyTorch but unallocated.
MSG
exit 1
