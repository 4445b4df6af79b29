package store

import (
	"context"

	"github.com/batchfit/batchfit/internal/record"
)

// Null is the history of --no-db: it records nothing and knows no run, so
// every search runs and nothing is left behind.
type Null struct{}

// BeginRun records nothing; the run keeps no id.
func (Null) BeginRun(context.Context, *record.Run) error { return nil }

// AddTrial records nothing.
func (Null) AddTrial(context.Context, string, record.Trial) error { return nil }

// FinishRun records nothing.
func (Null) FinishRun(context.Context, *record.Run) error { return nil }

// Cached knows no run.
func (Null) Cached(context.Context, string) (*record.Run, error) { return nil, nil }

// Nearest knows no run.
func (Null) Nearest(context.Context, string) (*record.Run, error) { return nil, nil }

// Close does nothing.
func (Null) Close() error { return nil }

// TrialStarted records nothing: with --no-db a batchfit that dies leaves
// no record for the next one to clean up after.
func (Null) TrialStarted(context.Context, string, TrialProcess) (int64, error) { return 0, nil }

// ClearTrial does nothing.
func (Null) ClearTrial(context.Context, int64) error { return nil }

// JobSubmitting records nothing: with --no-db a batchfit that dies leaves
// its trial's job to Slurm's time limit.
func (Null) JobSubmitting(context.Context, string, string) (int64, error) { return 0, nil }

// JobSubmitted records nothing.
func (Null) JobSubmitted(context.Context, int64, string) error { return nil }

// ClearJob does nothing.
func (Null) ClearJob(context.Context, int64) error { return nil }
