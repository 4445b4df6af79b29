package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/runner"
	"github.com/batchfit/batchfit/internal/search"
)

type hintErr struct{ hint string }

func (e hintErr) Error() string { return "inner" }
func (e hintErr) Hint() string  { return e.hint }

func TestExitCodeAndHint(t *testing.T) {
	limitErr := func() error { _, err := runner.ParseLimit("24XB"); return err }()
	for _, tc := range []struct {
		name string
		err  error
		code int
		hint string
	}{
		{"usage", usageError("fix it", "bad flag"), exitUsage, "fix it"},
		{"config", limitErr, exitUsage, "give --memory-limit as a GPU"},
		{"nothing fits", &runner.NothingFitsError{Size: 8, Min: 8, LogDir: "/logs"}, exitNothingFits, "/logs"},
		{"nothing fits, wrapped", fmt.Errorf("settle: %w", search.ErrNothingFits), exitNothingFits, ""},
		{"ignores the batch size", fmt.Errorf("probe: %w", &runner.IgnoresBatchSizeError{Small: 8, Large: 8192}), exitError, "pass the size with {}"},
		{"interrupted", runner.ErrInterrupted, exitInterrupted, ""},
		{"canceled", fmt.Errorf("probe: %w", context.Canceled), exitInterrupted, ""},
		{"other", errors.New("disk full"), exitError, ""},
		// A hint deep in the chain is found past wrappers without one.
		{"deep hint", commandErr(fmt.Errorf("start trial 1: %w", hintErr{"install Slurm"})), exitError, "install Slurm"},
		{"empty hint skipped", &exitErr{code: exitError, err: hintErr{"the inner one"}}, exitError, "the inner one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.code {
				t.Errorf("exit code %d, want %d", got, tc.code)
			}
			if got := hintOf(tc.err); got != tc.hint && !(tc.hint != "" && strings.Contains(got, tc.hint)) {
				t.Errorf("hint %q, want %q", got, tc.hint)
			}
		})
	}
}
