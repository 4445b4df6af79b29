package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/caveat"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/procgroup"
	"github.com/batchfit/batchfit/internal/runner"
	"github.com/batchfit/batchfit/internal/search"
)

func TestExitCodeAndHint(t *testing.T) {
	limitErr := func() error { _, err := limit.Parse("24XB"); return err }()
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
		{"ignores the batch size", fmt.Errorf("probe: %w", &caveat.IgnoresBatchSizeError{Small: 8, Large: 8192}), exitError, "pass the size with {}"},
		{"interrupted", runner.ErrInterrupted, exitInterrupted, ""},
		{"canceled", fmt.Errorf("probe: %w", context.Canceled), exitInterrupted, ""},
		{"other", errors.New("disk full"), exitError, ""},
		// A hint deep in the chain is found past wrappers without one.
		{"deep hint", commandErr(fmt.Errorf("start trial 1: %w", hint.With(errors.New("inner"), "install Slurm"))), exitError, "install Slurm"},
		{"empty hint skipped", &exitErr{code: exitError, err: hint.With(errors.New("inner"), "the inner one")}, exitError, "the inner one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.code {
				t.Errorf("exit code %d, want %d", got, tc.code)
			}
			if got := hint.Of(tc.err); got != tc.hint && !(tc.hint != "" && strings.Contains(got, tc.hint)) {
				t.Errorf("hint %q, want %q", got, tc.hint)
			}
		})
	}
}

// TestRefusedOffLinux: where trials cannot run (macOS, procgroup.CheckPlatform),
// the commands that would start one refuse before anything starts, with
// exit code 1 and a hint; the commands that only read work.
func TestRefusedOffLinux(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	checkPlatform = func() error { return &procgroup.PlatformError{OS: "macOS"} }
	t.Cleanup(func() { checkPlatform = procgroup.CheckPlatform })
	db := filepath.Join(t.TempDir(), "h.db")
	const refusal = "batchfit: error: local trials need Linux (process groups, cgroups and /proc control each trial); this is macOS\n" +
		"batchfit: hint: run batchfit on the Linux GPU machine; on macOS, show, history, cache and cards work\n"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"demo", []string{"demo", "--db", db}},
		{"search", []string{"search", "--db", db, "--", "true", "{}"}},
		{"worker", []string{"search", "--db", db, "--worker", "--", "python3", "-m", "batchfit.worker", "m:Trial"}},
		{"soak", []string{"demo", "--db", db, "--soak", "1m"}},
		{"doctor", []string{"doctor", "--", "python3", "-m", "batchfit.worker", "m:Trial"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr); code != exitError {
				t.Errorf("exit code %d, want %d", code, exitError)
			}
			if stdout.Len() != 0 || stderr.String() != refusal {
				t.Errorf("stdout %q, stderr %q; want nothing and\n%s", stdout.String(), stderr.String(), refusal)
			}
		})
	}
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the history was opened before the refusal: %v", err)
	}

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--json", "--no-db"}, strings.NewReader(""), &stdout, &stderr); code != exitError {
		t.Errorf("demo --json: exit code %d, want %d", code, exitError)
	}
	var doc struct {
		Runs  []json.RawMessage
		Error struct {
			Message, Hint string
			ExitCode      int `json:"exit_code"`
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil || len(doc.Runs) != 0 || doc.Error.ExitCode != exitError || !strings.HasPrefix(doc.Error.Hint, "run batchfit on the Linux GPU machine") {
		t.Errorf("demo --json: %v: %s", err, stdout.String())
	}

	for _, args := range [][]string{{"cards"}, {"history", "--db", filepath.Join(t.TempDir(), "other.db")}, {"--version"}, {"--help"}} {
		stdout.Reset()
		stderr.Reset()
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitFound || stderr.Len() != 0 {
			t.Errorf("%v: exit code %d, stderr %q; want 0 and nothing", args, code, stderr.String())
		}
	}
}

// The search flags that mean nothing to the demo are out of its help, yet
// still parse, with a note, so that a command that passed them still runs.
func TestDemoTakesSearchOnlyFlags(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the demo runs on Linux")
	}
	var help bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--help"}, strings.NewReader(""), &help, &help); code != 0 {
		t.Fatalf("demo --help: exit %d", code)
	}
	for _, name := range notForDemo {
		if strings.Contains(help.String(), "--"+name+" ") {
			t.Errorf("demo --help lists --%s", name)
		}
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"demo", "--no-db", "--verbose", "--no-preload"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 || strings.TrimSpace(stdout.String()) == "" {
		t.Fatalf("demo --verbose --no-preload: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	for _, name := range []string{"verbose", "no-preload"} {
		if !strings.Contains(stderr.String(), "batchfit: note: --"+name+" does nothing in the demo") {
			t.Errorf("stderr %q: no note on --%s", stderr.String(), name)
		}
	}
}
