package probe

import (
	"errors"
	"syscall"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/trial"
)

// What a trial could not write stops the search, and a lost report leaves
// it without an outcome; unless batchfit or a signal ended the trial, which
// explains a report cut off.
func TestLostOutput(t *testing.T) {
	logErr := &trial.LogError{Path: "/logs/trial-003-b128.err", Err: syscall.ENOSPC}
	cut := &adapter.ReportError{Path: "/logs/trial-003-b128.report.jsonl", Err: adapter.ErrCutShort}
	said := classify.Scan([]byte(adapter.ReportFailedPrefix + "No space left on device (errno 28): /logs/trial-003-b128.report.jsonl\n"))
	tests := []struct {
		name   string
		res    trial.Result
		logErr *trial.LogError
		cut    *adapter.ReportError
		want   error
		report bool
	}{
		{"nothing lost", trial.Result{}, nil, nil, nil, false},
		{"the log", trial.Result{}, logErr, nil, logErr, false},
		{"the report, as the adapter said", trial.Result{Matches: said}, logErr, nil, syscall.ENOSPC, true},
		{"the report cut short", trial.Result{ExitCode: 0}, nil, cut, adapter.ErrCutShort, true},
		{"cut short by a signal", trial.Result{ExitCode: -1, Signal: syscall.SIGKILL}, nil, cut, nil, false},
		{"cut short by the time limit", trial.Result{TimedOut: true}, nil, cut, nil, false},
		{"canceled", trial.Result{Canceled: true, Matches: said}, logErr, cut, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, report := lostOutput(tt.res, tt.logErr, tt.cut)
			if (got == nil) != (tt.want == nil) || (tt.want != nil && !errors.Is(got, tt.want)) || report != tt.report {
				t.Errorf("lostOutput = %v, %v; want %v, %v", got, report, tt.want, tt.report)
			}
		})
	}
}

func TestOutputErrorHint(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&trial.LogError{Path: "/logs/trial-003-b128.err", Err: syscall.ENOSPC}, "free space on /logs or give --log-dir elsewhere"},
		{&adapter.ReportError{Path: "/logs/r.jsonl", Err: syscall.EDQUOT}, "free space on /logs or give --log-dir elsewhere"},
		{&adapter.ReportError{Path: "/logs/r.jsonl", Err: adapter.ErrCutShort}, "free space on /logs or give --log-dir elsewhere"},
		{&trial.LogError{Path: "/logs/trial-003-b128.err", Err: syscall.EACCES}, "make /logs writable or give --log-dir elsewhere"},
	}
	for _, tt := range tests {
		e := &OutputError{N: 3, Size: 128, Err: tt.err}
		if got := e.Hint(); got != tt.want {
			t.Errorf("%v: hint %q, want %q", e, got, tt.want)
		}
	}
}
