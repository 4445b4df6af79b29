package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/parentpipe"
	"github.com/batchfit/batchfit/internal/testutil"
)

// TestRunWatchesParent: run stops mid-trial when the pipe ends, as on
// Ctrl-C, takes the variable out of the trials' environment, and refuses
// one that names no pipe.
func TestRunWatchesParent(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	fd, w := testutil.ParentPipe(t)
	t.Setenv(parentpipe.Env, fd)
	time.AfterFunc(time.Second, func() { w.Close() })
	var stdout, stderr bytes.Buffer
	start := time.Now()
	// Each simulated trial sleeps a minute first: run returns long before
	// only if the trial was stopped.
	code := run(context.Background(), []string{"demo", "--no-db", "--sim-slow-start", "1m"}, strings.NewReader(""), &stdout, &stderr)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("run returned %v after the start, not soon after the pipe's end", took)
	}
	if code != exitInterrupted || !strings.Contains(stderr.String(), "batchfit: trial 1: batch 8 canceled") ||
		!strings.Contains(stderr.String(), "batchfit: error: interrupted; every trial process was stopped") {
		t.Errorf("exit code %d, stderr:\n%s", code, stderr.String())
	}
	if v, ok := os.LookupEnv(parentpipe.Env); ok {
		t.Errorf("$%s=%s left for the trials", parentpipe.Env, v)
	}

	t.Setenv(parentpipe.Env, "x")
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"demo", "--no-db"}, strings.NewReader(""), &stdout, &stderr)
	want := "batchfit: error: $BATCHFIT_PARENT_FD=\"x\" is not a file descriptor\n" +
		"batchfit: hint: unset BATCHFIT_PARENT_FD: it names the pipe of the program that started batchfit\n"
	if code != exitError || stderr.String() != want {
		t.Errorf("exit code %d, stderr:\n%s\nwant:\n%s", code, stderr.String(), want)
	}
}
