#!/bin/sh
# A trainer that exits 0 but leaves processes behind, appending their pids
# to $1: a child that ignores SIGTERM (still in the trial's process group)
# and a grandchild that escaped into a session of its own and whose parent
# has exited.
( trap '' TERM; exec sleep 1000 ) &
echo $! >> "$1"
( setsid sh -c 'echo $$ >> "$1"; exec sleep 1000' sh "$1" & )
while [ "$(wc -l < "$1")" -lt 2 ]; do sleep 0.01; done
echo "training done"
exit 0
