#!/bin/sh
# A launcher whose batchfit is gone: a background child, a grandchild, a
# daemon in a session of its own, each appending its pid to $1. With $2
# "detached" the daemon also empties its environment. It stays running
# until killed.
sleep 1001 &
echo $! >> "$1"
sh -c 'sleep 1002 & echo $! >> "$1"; wait' sh "$1" &
if [ "$2" = detached ]; then
	setsid -f env -i sh -c 'echo $$ >> "$1"; exec sleep 1003' sh "$1"
else
	setsid -f sh -c 'echo $$ >> "$1"; exec sleep 1003' sh "$1"
fi
wait
