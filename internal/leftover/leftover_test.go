package leftover

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/store"
)

// fakeStore is a history whose records the test sets, and which records
// what was cleared.
type fakeStore struct {
	trials            []store.LeftTrial
	jobs              []store.LeftJob
	trialsErr         error
	cleared, clearedJ []int64
}

var _ Store = (*fakeStore)(nil)

func (f *fakeStore) LeftTrials(context.Context) ([]store.LeftTrial, error) {
	return f.trials, f.trialsErr
}

func (f *fakeStore) ClearTrial(_ context.Context, id int64) error {
	f.cleared = append(f.cleared, id)
	return nil
}

func (f *fakeStore) LeftJobs(context.Context) ([]store.LeftJob, error) { return f.jobs, nil }

func (f *fakeStore) ClearJob(_ context.Context, id int64) error {
	f.clearedJ = append(f.clearedJ, id)
	return nil
}

func TestStopNothingLeft(t *testing.T) {
	var stderr bytes.Buffer
	Stop(context.Background(), &fakeStore{}, &stderr)
	if stderr.Len() > 0 {
		t.Errorf("with nothing left it says:\n%s", stderr.String())
	}
}

func TestStopWarnsAndGoesOn(t *testing.T) {
	var stderr bytes.Buffer
	s := &fakeStore{trialsErr: errors.New("list trials left running: disk I/O error")}
	Stop(context.Background(), s, &stderr)
	if want := "batchfit: warning: list trials left running: disk I/O error\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

// A job left by a killed run that cannot be cancelled now (no Slurm here)
// keeps its record, for the next batchfit to try again.
func TestStopKeepsJobsSlurmCannotCancel(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var stderr bytes.Buffer
	s := &fakeStore{jobs: []store.LeftJob{{ID: 7, RunID: "run1", OwnerPID: 4242, Name: "batchfit-x", JobID: "10"}}}
	Stop(context.Background(), s, &stderr)
	if want := "batchfit: warning: cancel the Slurm jobs of 1 trials left by killed runs: "; !strings.HasPrefix(stderr.String(), want) {
		t.Errorf("stderr %q, want it to start %q", stderr.String(), want)
	}
	if len(s.clearedJ) > 0 {
		t.Errorf("cleared the records %v of jobs still running", s.clearedJ)
	}
}
