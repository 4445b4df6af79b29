#!/bin/sh
# A hung trial that ignores SIGTERM: only SIGKILL ends it.
trap '' TERM
echo started
while :; do sleep 0.1; done
