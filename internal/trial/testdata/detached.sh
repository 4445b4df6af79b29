#!/bin/sh
# A trainer that leaves a fully detached daemon behind and exits: a new
# session, an empty environment (no cookie), its parent gone. It appends
# the daemon's pid to $1. Only a cgroup holds on to it.
setsid -f env -i sh -c 'echo $$ >> "$1"; exec sleep 1000' sh "$1"
while [ ! -s "$1" ]; do sleep 0.01; done
echo "training done"
