#!/bin/sh
# A broken command: a message on stderr, exit status 3.
echo "loading config"
echo "error: no such dataset: imagenet-42" >&2
exit 3
