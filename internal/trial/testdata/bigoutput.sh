#!/bin/sh
# Writes 2000 numbered lines to stdout and 3 to stderr.
i=0
while [ $i -lt 2000 ]; do
	echo "stdout line $i of the trial's output, padded to be long enough"
	i=$((i + 1))
done
echo "warning: first" >&2
echo "warning: second" >&2
echo "error: last" >&2
