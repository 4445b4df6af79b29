#!/bin/sh
# A trainer that prints 60 KB of progress, then catches an OOM, prints it
# and exits with status 0.
yes 'epoch 0 step 0 loss 6.9082 lr 0.001 throughput 1234.5 samples/s ......' | head -c 61440 >&2
echo 'WARNING: skipping batch after torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 392.00 MiB. GPU 0 has a total capacity of 23.55 GiB of which 301.44 MiB is free.' >&2
echo "training done"
