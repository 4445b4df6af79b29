package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/parentpipe"
	"github.com/batchfit/batchfit/internal/report"
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
  0    the answer was found (or read from the history)
  1    error: a trial crashed, the command does not seem to use the batch size,
       or batchfit could not go on
  2    usage: bad flags or arguments
  3    nothing fits: even --min does not run
  130  interrupted (Ctrl-C, SIGTERM, or SIGHUP when the terminal closes);
       every trial process was stopped`

const outputHelp = `Output:
  stdout carries the result only; progress and errors go to stderr.
  --json  exactly one JSON document for every command line, usage errors
          (exit 2) included: {"schema_version": 1, "runs": [...],
          "doctor": null, "error": null}. "runs" holds the run record (one
          per GPU model with --per-gpu-model; [] when the command failed
          before a record began); "error" is null on exit 0, else
          {"message", "hint", "exit_code"}, also when a run that failed
          after trials says how in its own status and error (docs/json.md)
  -q      the answer alone (the --margin size with --margin); nothing when
          there is none
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
	var ce *hint.ConfigError
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

// streams are the command's I/O; tests swap them.
type streams struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// doc is the --json document run prints when the command ends, with
	// the error it ended with; nil without --json.
	doc *report.Document
}

// document returns the --json document the command's result goes into.
func (s *streams) document() *report.Document {
	if s.doc == nil {
		s.doc = report.NewDocument()
	}
	return s.doc
}

// run is the whole program: it parses args, runs the command and returns the
// exit code. Only here are errors printed, and the --json document.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// A closed terminal (SIGHUP) stops the search as Ctrl-C does: left to
	// its default, SIGHUP would end batchfit with its trials still running.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// The end of the program that started batchfit stops it the same way.
	// The variable names batchfit's own pipe: trials do not see it.
	ctx, unwatch, watchErr := parentpipe.Watch(ctx, os.Getenv(parentpipe.Env))
	defer unwatch()
	os.Unsetenv(parentpipe.Env)

	io := &streams{stdin: stdin, stdout: stdout, stderr: stderr}
	if jsonRequested(args) {
		// Before cobra parses anything: a command line it refuses still
		// gets its document.
		io.doc = report.NewDocument()
	}
	root := newRootCommand(io)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	setHelpWidth(root, stdout)
	var cmd *cobra.Command
	var err error
	if watchErr != nil {
		cmd, err = root, &exitErr{code: exitError, err: watchErr, hint: "unset " + parentpipe.Env + ": it names the pipe of the program that started batchfit"}
	} else {
		cmd, err = root.ExecuteContextC(ctx)
	}
	if err != nil {
		err = printError(ctx, stderr, cmd, err)
	}
	if io.doc != nil && !cmd.Hidden && !askedForHelp(cmd) && !(cmd == root && err == nil) {
		if err != nil {
			io.doc.Error = &report.DocumentError{Message: err.Error(), ExitCode: exitCode(err)}
			if h := hint.Of(err); h != "" {
				io.doc.Error.Hint = &h
			}
		}
		report.WriteJSONValue(stdout, io.doc)
	}
	return exitCode(err)
}

// printError writes err and its hint on stderr, and returns it marked with
// its exit code.
func printError(ctx context.Context, stderr io.Writer, cmd *cobra.Command, err error) error {
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
	if h := hint.Of(err); h != "" {
		for _, line := range strings.Split(termtext.Clean(h), "\n") {
			fmt.Fprintf(stderr, "batchfit: hint: %s\n", line)
		}
	}
	return err
}

// jsonRequested says whether the command line asks for --json before the
// command to run (after "--"), as pflag would read it: "--json" or
// "--json=BOOL".
func jsonRequested(args []string) bool {
	asked := false
	for _, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--json"); ok {
			switch b, err := strconv.ParseBool(strings.TrimPrefix(v, "=")); {
			case v == "":
				asked = true
			case strings.HasPrefix(v, "=") && err == nil:
				asked = b
			}
		}
	}
	return asked
}

// askedForHelp says whether the command line asked for help or the
// version, which go to stdout instead of a document.
func askedForHelp(cmd *cobra.Command) bool {
	for _, name := range []string{"help", "version"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return true
		}
	}
	return cmd.Name() == "help"
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
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			warnDeprecatedFlags(cmd, io.stderr)
		},
	}
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newSearchCommand(io), newDemoCommand(io), newHistoryCommand(io), newShowCommand(io), newSimTrialCommand(io), newSimHoldCommand(io))
	root.AddCommand(newDoctorCommand(io), newCacheCommand(io), newCardsCommand(io), newVersionCommand(io))
	for _, cmd := range root.Commands() {
		registerCompletions(cmd)
	}
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
	hint := fmt.Sprintf("run '%s --help' for usage", c.CommandPath())
	if s := flagSuggestion(c, err); s != "" {
		hint = s + " " + hint
	}
	return usageError(hint, "%s", err)
}

// deprecatedFlags are old flag names, hidden, that still work: each with the
// name it is now.
var deprecatedFlags = map[string]string{
	"cache-max-age": "history-max-age",
	"cache-env":     "history-env",
}

// warnDeprecatedFlags warns, on stderr, of each deprecated flag given.
// pflag's own notice goes to cobra's error buffer, which nothing prints.
func warnDeprecatedFlags(cmd *cobra.Command, stderr io.Writer) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if now, ok := deprecatedFlags[f.Name]; ok {
			fmt.Fprintf(stderr, "batchfit: warning: --%s is deprecated: it is --%s\n", f.Name, now)
		}
	})
}

// errSilent ends a command with an exit code whose message was already shown.
var errSilent = errors.New("")
