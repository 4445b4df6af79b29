#!/bin/sh
# A trainer whose OOM is followed by ~200 KB of other output on stderr (the
# other ranks' shutdown logs), then exit status 1: the OOM is far outside
# the 64 KiB tail.
echo "epoch 0 step 0 loss 6.9082"
echo '[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 1 has a total capacity of 79.10 GiB of which 5.12 GiB is free.' >&2
sleep 0.3
yes '[rank0]:[W614 11:07:12.339120914 ProcessGroupNCCL.cpp:1250] Warning: process group has NOT been destroyed before we destruct ProcessGroupNCCL' | head -n 1700 >&2
exit 1
