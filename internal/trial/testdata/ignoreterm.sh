#!/bin/sh
# A trainer that ignores SIGTERM, so only SIGKILL ends it.
trap '' TERM
sleep 1000 &
echo $! > "$1"
wait
