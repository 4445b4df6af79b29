// Package testutil holds what batchfit's tests share and nothing else
// imports: the split of the tests into two tiers, and the pipe a parent
// program watches batchfit through.
package testutil

import "testing"

// NeedsFull skips t in the fast tier (go test -short): the pure logic and
// the CLI scenarios on the simulator. The full run, the README's test
// command, has what needs names: real torch, a Python interpreter started
// for each case, Chromium, tmux, a Slurm cluster, the wheel.
func NeedsFull(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: the full run (./scripts/test) covers it", needs)
	}
}
