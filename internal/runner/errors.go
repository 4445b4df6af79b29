package runner

import (
	"context"
	"fmt"
	"strings"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// ConfigError is a search that cannot run as configured (bad bounds, a
// limit the GPU cannot hold, an option that does not apply); nothing ran.
// The CLI reports it as a usage error.
type ConfigError struct {
	Err  error
	hint string
}

func configError(hint, format string, args ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, args...), hint: hint}
}

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Hint says how to fix the configuration.
func (e *ConfigError) Hint() string { return e.hint }

// hinted is an error with a suggestion for the user.
type hinted struct {
	err  error
	hint string
}

func withHint(err error, hint string) error { return &hinted{err: err, hint: hint} }

func (e *hinted) Error() string { return e.err.Error() }
func (e *hinted) Unwrap() error { return e.err }
func (e *hinted) Hint() string  { return e.hint }

// ErrInterrupted is a search stopped by its context (Ctrl-C) after every
// trial process was stopped; errWorkerInterrupted is a doctor run's. Both
// match context.Canceled.
var (
	ErrInterrupted       error = interrupted("interrupted; every trial process was stopped")
	errWorkerInterrupted error = interrupted("interrupted; the worker was stopped")
)

type interrupted string

func (e interrupted) Error() string      { return string(e) }
func (interrupted) Is(target error) bool { return target == context.Canceled }

// NothingFitsError is a search in which even the smallest size did not
// fit. It matches search.ErrNothingFits.
type NothingFitsError struct {
	Min    int    // the smallest size of the range
	LogDir string // where the trials' logs are
}

func (e *NothingFitsError) Error() string {
	return fmt.Sprintf("nothing fits: batch size %d does not run", e.Min)
}

// Is makes errors.Is(err, search.ErrNothingFits) true.
func (e *NothingFitsError) Is(target error) bool { return target == search.ErrNothingFits }

// Hint points at the logs.
func (e *NothingFitsError) Hint() string {
	return fmt.Sprintf("lower --min, or check that the command fits on this GPU at all (see the trial logs in %s)", e.LogDir)
}

// CrashError is a search stopped by a trial that failed for a reason other
// than memory; it wraps the search's *search.CrashError.
type CrashError struct {
	crash *search.CrashError
	hint  string
}

// crashError shows the end of the crashed trial's stderr and its log.
func crashError(run *record.Run, crash *search.CrashError) error {
	hint := "the command failed for a reason other than memory; fix it, then search again"
	if t := run.LastFailure(crash.Observation.Size); t != nil {
		hint = fmt.Sprintf("the command failed for a reason other than memory at batch size %d; its stderr ends with:\n%s\nfull log: %s",
			t.Size, IndentTail(t.Tail, 15), t.Stderr)
	}
	return &CrashError{crash: crash, hint: hint}
}

func (e *CrashError) Error() string {
	return fmt.Sprintf("trial crashed: %s", e.crash.Observation.Outcome)
}
func (e *CrashError) Unwrap() error { return e.crash }

// Hint shows the trial's stderr tail and log.
func (e *CrashError) Hint() string { return e.hint }

// IndentTail returns the last lines of s, indented, or "(no output)".
func IndentTail(s string, lines int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "  (no output)"
	}
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return "  " + strings.Join(all, "\n  ")
}
