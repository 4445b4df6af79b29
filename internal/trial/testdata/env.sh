#!/bin/sh
# Prints what the trial sees of its environment and working directory.
echo "size=$BATCHFIT_BATCH_SIZE"
echo "dir=$(pwd)"
echo "cookie=${BATCHFIT_TRIAL_COOKIE:+set}"
