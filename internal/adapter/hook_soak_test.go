package adapter

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A --soak trial has no step limit: batchfit ends it with SIGTERM when its
// time is up, and the adapter (BATCHFIT_SOAK=1) answers by writing its
// report and leaving with status 0, running nothing more of the program.
// These tests run the real hook in real Python processes.

func TestHookSoakStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	r, printed := runSoaked(t, py, nil, 5)
	ev := checkSoakStop(t, r, printed)
	// CPU torch has no CUDA peaks to report: the steps and their times are
	// what the event holds.
	if ev.Torch == "" || ev.CUDAInitialized || len(ev.StepPeaks) != 0 {
		t.Errorf("event = %+v, want torch's version, no CUDA and no step peaks", ev)
	}
}

// The stand-in torch takes the CUDA path: every step's peak is reported
// with the stop.
func TestHookSoakReportsStepPeaks(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	fake, err := filepath.Abs(testdata("faketorch"))
	if err != nil {
		t.Fatal(err)
	}
	r, printed := runSoaked(t, py, []string{"PYTHONPATH=" + fake, "FAKE_CUDA=1"}, 4)
	ev := checkSoakStop(t, r, printed)
	if len(ev.StepPeaks) != ev.Steps || ev.StepPeaks[0] != 25542543872 {
		t.Errorf("step peaks %v, want one of 25542543872 for each of %d steps", ev.StepPeaks, ev.Steps)
	}
}

// checkSoakStop asserts that the program was stopped as a soak: status 0,
// one event that says stopped after the steps it printed (or one more: the
// signal may land between a step and its line), nothing after the loop.
func checkSoakStop(t *testing.T, r pyRun, printed int) Event {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	ev := onlyEvent(t, r)
	if !ev.Stopped || ev.Exception != "" || ev.OOM {
		t.Errorf("event = %+v, want stopped, no exception", ev)
	}
	if ev.Steps != printed && ev.Steps != printed+1 {
		t.Errorf("event counts %d steps, the program printed %d; stdout:\n%s", ev.Steps, printed, r.stdout)
	}
	if len(ev.StepTimes) != ev.Steps-1 {
		t.Errorf("%d step times for %d steps", len(ev.StepTimes), ev.Steps)
	}
	for _, marker := range []string{"caught", "finally ran", "after loop", "program atexit ran"} {
		if strings.Contains(r.stdout, marker) {
			t.Errorf("the program's own code ran after the stop (%q); stdout:\n%s", marker, r.stdout)
		}
	}
	if r.stderr != "" {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	return ev
}

// runSoaked runs soaktrain.py with the adapter in soak mode and no step
// limit, sends it SIGTERM once it has printed after steps, and returns the
// run and how many steps it printed in all.
func runSoaked(t *testing.T, python string, env []string, after int) (pyRun, int) {
	t.Helper()
	hooked, report := hookedEnv(t, append(env, SoakEnv+"=1"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, testdata("soaktrain.py"))
	cmd.Env = hooked
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	printed := 0
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		stdout.WriteString(lines.Text() + "\n")
		// The stop may cut the last line short ("step "): it counts only
		// whole.
		if n, err := strconv.Atoi(strings.TrimPrefix(lines.Text(), "step ")); err == nil {
			printed = n
		}
		if printed == after {
			// Once: later lines keep counting but send nothing more.
			cmd.Process.Signal(syscall.SIGTERM)
			after = -1
		}
	}
	err = cmd.Wait()
	r := pyRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the program did not stop on SIGTERM; stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	if r.events, r.bad, err = Read(report); err != nil {
		t.Fatal(err)
	}
	return r, printed
}
