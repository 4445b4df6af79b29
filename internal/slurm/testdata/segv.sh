#!/bin/sh
# A crash by signal: the shell sends itself SIGSEGV.
echo "about to crash"
kill -SEGV $$
