// Package leftover stops what a killed batchfit left running: the processes
// of its trials and their Slurm jobs, which the history still lists as
// running, and then clears their records.
package leftover

import (
	"context"
	"fmt"
	"io"

	"github.com/batchfit/batchfit/internal/slurm"
	"github.com/batchfit/batchfit/internal/store"
	"github.com/batchfit/batchfit/internal/trial"
)

// Store is the history's record of the trials and jobs running;
// *store.Store is one.
type Store interface {
	LeftTrials(ctx context.Context) ([]store.LeftTrial, error)
	ClearTrial(ctx context.Context, id int64) error
	LeftJobs(ctx context.Context) ([]store.LeftJob, error)
	ClearJob(ctx context.Context, id int64) error
}

var _ Store = (*store.Store)(nil)

// Stop stops the processes of trials whose batchfit died (SIGKILL, a crash)
// and that the history still lists as running, and cancels their Slurm
// jobs, says so on stderr, and clears their records. Every command that
// opens the history does it first, so a killed search costs no GPU memory
// past the next batchfit command. What fails is a warning on stderr: the
// command goes on.
func Stop(ctx context.Context, s Store, stderr io.Writer) {
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
	cancelLeftJobs(ctx, s, stderr)
}

// cancelLeftJobs cancels the Slurm jobs of trials whose batchfit died. A
// job that cannot be cancelled now (Slurm's commands missing, the
// controller down) keeps its record, for the next batchfit to try again.
func cancelLeftJobs(ctx context.Context, s Store, stderr io.Writer) {
	left, err := s.LeftJobs(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "batchfit: warning: %v\n", err)
		return
	}
	if len(left) == 0 {
		return
	}
	ex, err := slurm.New(slurm.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "batchfit: warning: cancel the Slurm jobs of %d trials left by killed runs: %v\n", len(left), err)
		return
	}
	for _, j := range left {
		ids, err := ex.CancelLeft(ctx, j.Name, j.JobID)
		for _, id := range ids {
			fmt.Fprintf(stderr, "batchfit: cancelled Slurm job %s left by run %s (pid %d, killed)\n", id, j.RunID, j.OwnerPID)
		}
		if err != nil {
			fmt.Fprintf(stderr, "batchfit: warning: %v\n", err)
			continue
		}
		if err := s.ClearJob(ctx, j.ID); err != nil {
			fmt.Fprintf(stderr, "batchfit: warning: %v\n", err)
		}
	}
}
