package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/report"
	"github.com/batchfit/batchfit/internal/runner"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/termtext"
)

// Exit codes, documented in --help.
const (
	exitFound       = 0
	exitError       = 1
	exitUsage       = 2
	exitNothingFits = 3
	exitInterrupted = 130
)

const exitCodesHelp = `Exit codes:
  0    the answer was found (or read from the cache)
  1    error: a trial crashed, the command does not seem to use the batch size,
       or batchfit could not go on
  2    usage: bad flags or arguments
  3    nothing fits: even --min does not run
  130  interrupted (Ctrl-C, SIGTERM, or SIGHUP when the terminal closes);
       every trial process was stopped`

const outputHelp = `Output:
  stdout carries the result only; progress and errors go to stderr.
  --json  exactly one JSON document: the run record, also on failure (its
          status and error), or {"status", "error", "hint", "exit_code"}
          when the search failed before it had a record; nothing on a
          usage error (exit 2)
  -q      the answer alone; nothing when there is none
  default the summary, when the search reached an outcome (an answer,
          nothing fits, a crash or Ctrl-C after trials); nothing on an
          error before the first trial`

// exitErr is an error with the exit code it ends batchfit with.
type exitErr struct {
	code int
	err  error
	hint string
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }
func (e *exitErr) Hint() string  { return e.hint }

func usageError(hint string, format string, args ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, args...), hint: hint}
}

// exitCode maps what a command returned to batchfit's exit code. Errors
// that carry none are classified by what they match.
func exitCode(err error) int {
	var ee *exitErr
	var ce *runner.ConfigError
	switch {
	case err == nil:
		return exitFound
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ce):
		return exitUsage
	case errors.Is(err, search.ErrNothingFits):
		return exitNothingFits
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return exitError
}

// hintOf returns the first non-empty hint anywhere in err's chain.
func hintOf(err error) string {
	type hinter interface{ Hint() string }
	for err != nil {
		var h hinter
		if !errors.As(err, &h) {
			return ""
		}
		if hint := h.Hint(); hint != "" {
			return hint
		}
		err = errors.Unwrap(h.(error))
	}
	return ""
}

// streams are the command's I/O; tests swap them.
type streams struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// run is the whole program: it parses args, runs the command and returns the
// exit code. Only here are errors printed.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// A closed terminal (SIGHUP) stops the search as Ctrl-C does: left to
	// its default, SIGHUP would end batchfit with its trials still running.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	io := &streams{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCommand(io)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitFound
	}
	var ee *exitErr
	if !errors.As(err, &ee) {
		// Errors that reach here unmarked are cobra's own, about the
		// command line; commands mark theirs (commandErr). cmd is the
		// command whose line it was, or the root for an unknown command.
		err = &exitErr{code: exitUsage, err: err, hint: fmt.Sprintf("run '%s --help' for usage", cmd.CommandPath())}
		if ctx.Err() != nil {
			err = &exitErr{code: exitInterrupted, err: err}
		}
	}
	// Errors and hints can quote a trial's output: they reach the terminal
	// cleaned (termtext), whatever made them.
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "batchfit: error: %s\n", termtext.Line(msg, 0))
	}
	if hint := hintOf(err); hint != "" {
		for _, line := range strings.Split(termtext.Clean(hint), "\n") {
			fmt.Fprintf(stderr, "batchfit: hint: %s\n", line)
		}
	}
	return exitCode(err)
}

// commandErr marks an error a command returned with its exit code, so that
// run can tell it from cobra's own errors.
func commandErr(err error) error {
	var ee *exitErr
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &exitErr{code: exitCode(err), err: err}
}

// runE wraps a command's body so its errors are marked (commandErr).
func runE(f func(cmd *cobra.Command, args []string) error) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error { return commandErr(f(cmd, args)) }
}

// runJSON is runE for a command with --json, which promises one JSON
// document on stdout for every command line batchfit accepted: when the
// command fails before it wrote one (a history that cannot be opened, a
// search that stopped before its record began), the error is the
// document. A usage error (exit 2) prints nothing on stdout, as for a
// command line cobra refuses before --json is even read: the command line
// is wrong, and there is no result.
func runJSON(asJSON *bool, io *streams, f func(cmd *cobra.Command, args []string) error) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		out := &countingWriter{w: io.stdout}
		io.stdout = out
		defer func() { io.stdout = out.w }()
		err := commandErr(f(cmd, args))
		if err != nil && *asJSON && out.n == 0 && exitCode(err) != exitUsage {
			writeErrorJSON(out.w, err)
		}
		return err
	}
}

// errorDocument is what --json prints for a command that failed before it
// had a record to print.
type errorDocument struct {
	Status   record.Status `json:"status"`
	Error    string        `json:"error"`
	Hint     string        `json:"hint,omitempty"`
	ExitCode int           `json:"exit_code"`
}

func writeErrorJSON(w io.Writer, err error) {
	doc := errorDocument{Status: record.Failed, Error: err.Error(), Hint: hintOf(err), ExitCode: exitCode(err)}
	if doc.ExitCode == exitInterrupted {
		doc.Status = record.Interrupted
	}
	report.WriteJSONValue(w, doc)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func newRootCommand(io *streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "batchfit",
		Short: "Find the largest batch size your training command can run at, exactly",
		Long: `batchfit finds the largest batch size a deep-learning training command can run
at on a GPU. Every trial runs in a fresh process, so no memory carries over
from one trial to the next; failures are classified (GPU out of memory, host
out of memory, size limit, hang, crash); memory is measured and modelled so
that the exact answer takes a handful of trials.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       currentVersion(),
	}
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newSearchCommand(io), newDemoCommand(io), newHistoryCommand(io), newShowCommand(io), newSimTrialCommand(io), newSimHoldCommand(io))
	root.AddCommand(newDoctorCommand(io), newCacheCommand(io), newCardsCommand(io))
	strictCommandLine(root)
	return root
}

// flagError is a usage error for a flag cobra could not parse. Words before
// it that are not flags mean the training command was given without "--"
// before it, and its flags were read as batchfit's: say so.
func flagError(c *cobra.Command, err error) error {
	if words := c.Flags().Args(); len(words) > 0 {
		hint := fmt.Sprintf("put the command to run after --: %s [flags] -- %s ...", c.CommandPath(), strings.Join(words, " "))
		return usageError(hint, "%s (is it the command's?)", err)
	}
	return usageError(fmt.Sprintf("run '%s --help' for usage", c.CommandPath()), "%s", err)
}

// errSilent ends a command with an exit code whose message was already shown.
var errSilent = errors.New("")
