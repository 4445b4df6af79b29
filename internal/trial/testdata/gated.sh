#!/bin/sh
# Waits at its gate (the descriptor $BATCHFIT_GATE_FD names), as the adapter
# does when the program starts CUDA: one byte lets it on, the pipe's end
# without one makes it exit 3. Then it sleeps $1 seconds and says so.
echo $$ >> "$2"
case "$BATCHFIT_GATE_FD" in 3:*) ;; *) echo "no gate" >&2; exit 4 ;; esac
b=$(head -c 1 <&3)
[ -n "$b" ] || { echo "gate closed" >&2; exit 3; }
echo "through the gate"
sleep "$1"
echo "done"
