package main

import (
	"context"
	"fmt"
	"io"

	"github.com/batchfit/batchfit/internal/store"
	"github.com/batchfit/batchfit/internal/trial"
)

// stopLeftTrials stops the processes of trials whose batchfit died (SIGKILL,
// a crash) and that the history still lists as running, says so, and
// clears their records. Every command that opens the history does it first,
// so a killed search costs no GPU memory past the next batchfit command.
func stopLeftTrials(ctx context.Context, s *store.Store, stderr io.Writer) {
	left, err := s.LeftTrials(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "batchfit: warning: %v\n", err)
		return
	}
	for _, t := range left {
		n := trial.Stop(trial.Process{PID: t.PID, Start: t.Start, Cgroup: t.Cgroup, Cookie: t.Cookie})
		if n > 0 {
			noun := "processes"
			if n == 1 {
				noun = "process"
			}
			fmt.Fprintf(stderr, "batchfit: stopped %d %s left by run %s (pid %d, killed)\n", n, noun, t.RunID, t.OwnerPID)
		}
		if err := s.ClearTrial(ctx, t.ID); err != nil {
			fmt.Fprintf(stderr, "batchfit: warning: %v\n", err)
		}
	}
}
