#!/bin/sh
# A hung trial: says it started, then waits forever (SIGTERM ends it).
echo started
exec sleep 600
