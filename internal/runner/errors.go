package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/termtext"
	"github.com/batchfit/batchfit/internal/worker"
)

// ErrInterrupted is a search stopped by its context (Ctrl-C) after every
// trial process was stopped. It matches context.Canceled.
var ErrInterrupted error = interrupted("interrupted; every trial process was stopped")

type interrupted string

func (e interrupted) Error() string      { return string(e) }
func (interrupted) Is(target error) bool { return target == context.Canceled }

// NothingFitsError is a search in which even the smallest size tried did
// not fit, with the way it failed. It matches search.ErrNothingFits.
type NothingFitsError struct {
	// Size is the smallest size tried: the grid's smallest, which
	// --multiple-of can put above --min (Min).
	Size, Min, MultipleOf int
	// Outcome is how the trial at Size ended ("" when unknown); Reason is
	// its classification's words, shown for a size limit.
	Outcome classify.Outcome
	Reason  string
	Timeout time.Duration // the per-trial limit, named when Size timed out
	LogDir  string        // where the trials' logs are
}

func (e *NothingFitsError) Error() string {
	msg := fmt.Sprintf("nothing fits: batch size %d does not run", e.Size)
	switch e.Outcome {
	case classify.OOM:
		msg += ": out of GPU memory"
	case classify.HostOOM:
		msg += ": out of host memory"
	case classify.Timeout:
		msg += ": timed out after " + e.Timeout.String()
	case classify.SizeLimit:
		msg += ": it hits a size limit that is not memory"
		if e.Reason != "" {
			msg += " (" + e.Reason + ")"
		}
	}
	return msg
}

// Is makes errors.Is(err, search.ErrNothingFits) true.
func (e *NothingFitsError) Is(target error) bool { return target == search.ErrNothingFits }

// Hint says what to change for the cause, and points at the logs.
func (e *NothingFitsError) Hint() string {
	logs := fmt.Sprintf("see the trial logs in %s", e.LogDir)
	switch e.Outcome {
	case classify.Timeout:
		return fmt.Sprintf("a trial must finish its steps within --timeout %s: raise --timeout, or make the command stop after BATCHFIT_STEPS training steps (%s)", e.Timeout, logs)
	case classify.HostOOM:
		return fmt.Sprintf("the machine's RAM ran out, not the GPU's memory: lower the command's host memory use (data loader workers, pinned memory) or free RAM (%s)", logs)
	}
	smaller := "lower --min"
	switch {
	case e.Size <= 1:
		return fmt.Sprintf("the command does not run at the smallest batch size; check that it fits on this GPU at all (%s)", logs)
	case e.MultipleOf > 1 && e.Size > e.Min:
		smaller = fmt.Sprintf("--multiple-of %d made %d the smallest size tried: lower --multiple-of", e.MultipleOf, e.Size)
	}
	return fmt.Sprintf("%s, or check that the command fits on this GPU at all (%s)", smaller, logs)
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

// IndentTail returns the last lines of a trial's output, made safe for the
// terminal and bounded in width (termtext.Tail), indented; or "(no output)".
func IndentTail(s string, lines int) string {
	all := termtext.Tail(s, lines, termtext.Width)
	if len(all) == 0 {
		return "  (no output)"
	}
	return "  " + strings.Join(all, "\n  ")
}

// WorkerStartHint shows why a warm worker (a search's or doctor's) did not
// start: the end of its traceback or of its stderr, and where, a line, the
// whole log is.
func WorkerStartHint(err error, where string) string {
	var se *worker.StartError
	if !errors.As(err, &se) {
		return ""
	}
	switch {
	case se.Stage == "start":
		return "check the worker command: batchfit doctor -- python -m batchfit.worker mymodule:Trial"
	case se.Stage == "warmup" && se.Outcome == "oom":
		return "even the warm-up batch does not fit; set BATCHFIT_WORKER_WARMUP to a smaller size, or check what else uses the GPU"
	}
	text := se.Traceback
	if text == "" {
		text = se.Tail
	}
	hint := fmt.Sprintf("the worker's output ends with:\n%s\n%s", IndentTail(text, 15), where)
	if se.Stage == "warmup" {
		hint += "\nthe warm-up runs at BATCHFIT_WORKER_WARMUP (default 1); a model that cannot train on one sample (BatchNorm) needs a larger one"
	}
	return hint
}
