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
  1    error: a trial crashed, or batchfit could not go on
  2    usage: bad flags or arguments
  3    nothing fits: even --min does not run
  130  interrupted (Ctrl-C); every trial process was stopped`

// exitError carries an exit code and an optional hint to main.
type exitErr struct {
	code int
	err  error
	hint string
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }

func usageError(hint string, format string, args ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, args...), hint: hint}
}

func failure(code int, hint string, err error) error {
	return &exitErr{code: code, err: err, hint: hint}
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
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	io := &streams{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCommand(io)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitFound
	}
	var ee *exitErr
	if !errors.As(err, &ee) {
		// cobra's own errors are about flags and arguments.
		ee = &exitErr{code: exitUsage, err: err, hint: "run 'batchfit --help' for usage"}
		if ctx.Err() != nil {
			ee = &exitErr{code: exitInterrupted, err: err}
		}
	}
	if ee.err != nil && ee.err.Error() != "" {
		fmt.Fprintf(stderr, "batchfit: error: %s\n", ee.err)
	}
	if ee.hint != "" {
		for _, line := range strings.Split(ee.hint, "\n") {
			fmt.Fprintf(stderr, "batchfit: hint: %s\n", line)
		}
	}
	return ee.code
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
		Version:       version,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(fmt.Sprintf("run '%s --help' for usage", c.CommandPath()), "%s", err)
	})
	root.AddCommand(newSearchCommand(io), newDemoCommand(io), newHistoryCommand(io), newShowCommand(io), newSimTrialCommand(io))
	root.AddCommand(newDoctorCommand(io))
	return root
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// errSilent ends a command with an exit code whose message was already shown.
var errSilent = errors.New("")
