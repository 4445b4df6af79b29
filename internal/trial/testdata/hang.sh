#!/bin/sh
# A trainer that hangs, with a child, writing the child's pid to $1.
sleep 1000 &
echo $! > "$1"
wait
