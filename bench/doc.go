// Package bench holds the suite a maintainer runs to see whether
// batchfit's answers are right and what they cost (README.md beside this
// file): Python scripts and shell scripts, run on a GPU machine. The
// package has no Go code of its own; its test runs the scripts' own unit
// tests (test_*.py), so that CI notices when a script's logic breaks.
package bench
