#!/bin/sh
# A trainer that runs out of GPU memory: PyTorch's traceback on stderr,
# exit status 1.
echo "epoch 0 step 0 loss 6.9082"
cat >&2 <<'TRACE'
Traceback (most recent call last):
  File "/work/examples/simclr/train.py", line 139, in main
    scaler.scale(loss).backward()
  File "/work/.venv/lib/python3.12/site-packages/torch/_tensor.py", line 630, in backward
    torch.autograd.backward(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 392.00 MiB. GPU 0 has a total capacity of 23.55 GiB of which 301.44 MiB is free. Including non-PyTorch memory, this process has 23.24 GiB memory in use. Of the allocated memory 22.61 GiB is allocated by PyTorch, and 197.06 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
TRACE
exit 1
