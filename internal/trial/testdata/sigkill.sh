#!/bin/sh
# A trainer killed by SIGKILL that batchfit did not send (as the kernel's
# OOM killer would); a shell running it would report exit status 137.
echo "loading dataset"
kill -9 $$
