#!/bin/sh
# A trainer that segfaults.
echo "step 0"
kill -SEGV $$
