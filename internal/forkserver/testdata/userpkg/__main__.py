import sys

print("package main", __name__, sys.argv)
