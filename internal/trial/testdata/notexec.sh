#!/bin/sh
# Not executable: its mode is 0644.
echo "never runs"
