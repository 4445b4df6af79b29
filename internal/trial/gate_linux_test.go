package trial

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gated runs testdata/gated.sh behind gate: it sleeps secs once through.
func gated(t *testing.T, ctx context.Context, gate *Gate, secs string, timeout time.Duration) Result {
	t.Helper()
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	spec := Spec{
		Argv:       []string{filepath.Join("testdata", "gated.sh"), secs, pids},
		StdoutPath: filepath.Join(dir, "stdout.log"),
		StderrPath: filepath.Join(dir, "stderr.log"),
		Timeout:    timeout,
		Gate:       gate,
	}
	t.Cleanup(func() { killPids(t, pids) })
	res, err := Run(ctx, spec, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func killPids(t *testing.T, path string) {
	for _, pid := range readPids(t, path) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// The time limit of a gated trial runs from its gate's opening: the time it
// waited does not count, and neither does it in Start and Duration.
func TestGateHoldsTheClock(t *testing.T) {
	gate := NewGate()
	done := make(chan Result, 1)
	go func() { done <- gated(t, context.Background(), gate, "0.2", time.Second) }()
	time.Sleep(1500 * time.Millisecond) // past the time limit, at the gate
	opened := time.Now()
	if !gate.Open() {
		t.Fatal("Open = false, want true")
	}
	if gate.Open() {
		t.Error("a second Open = true, want false")
	}
	res := <-done
	if res.TimedOut || res.ExitCode != 0 {
		t.Fatalf("exit %d, timed out %v, stderr %q: want a clean exit", res.ExitCode, res.TimedOut, res.StderrTail)
	}
	if !strings.Contains(string(res.StdoutTail), "through the gate") {
		t.Errorf("stdout %q: the trial did not pass its gate", res.StdoutTail)
	}
	if res.Start.Before(opened) || res.Duration > time.Second {
		t.Errorf("Start %v before the opening %v, or Duration %v counts the wait", res.Start, opened, res.Duration)
	}
}

// Once through its gate, a trial has its time limit as any other.
func TestGatedTrialTimesOut(t *testing.T) {
	gate := NewGate()
	time.AfterFunc(200*time.Millisecond, func() { gate.Open() })
	res := gated(t, context.Background(), gate, "30", 300*time.Millisecond)
	if !res.TimedOut {
		t.Fatalf("TimedOut = false (exit %d), want true", res.ExitCode)
	}
}

// A gated trial not wanted is canceled at its gate: its whole group goes,
// and the gate can no longer open.
func TestGatedTrialCanceled(t *testing.T) {
	gate := NewGate()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	res := gated(t, ctx, gate, "0", time.Minute)
	if !res.Canceled {
		t.Fatalf("Canceled = false (exit %d), want true", res.ExitCode)
	}
	if gate.Open() {
		t.Error("Open after the trial ended = true, want false")
	}
}

// A trial that ends before its gate opens (it never reached the GPU) is
// over: its result is its own.
func TestTrialEndsBeforeItsGate(t *testing.T) {
	dir := t.TempDir()
	res, err := Run(context.Background(), Spec{
		Argv:       []string{"sh", "-c", "echo cpu only"},
		StdoutPath: filepath.Join(dir, "out"), StderrPath: filepath.Join(dir, "err"),
		Gate: NewGate(),
	}, nil)
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.StdoutTail), "cpu only") {
		t.Fatalf("Run = exit %d, %q, %v; want a clean exit", res.ExitCode, res.StdoutTail, err)
	}
}

// A gate is for trials that batchfit execs: a launcher's are refused.
func TestGateRefusesALauncher(t *testing.T) {
	_, err := Run(context.Background(), Spec{Argv: []string{"true"}, Gate: NewGate(), Launcher: pathLauncher{}}, nil)
	if err == nil || !strings.Contains(err.Error(), "gated") {
		t.Fatalf("Run = %v, want a gated trial refused", err)
	}
}

// A trial canceled at its gate is killed at once, not after its grace: it
// has no work to save, and a program that handles SIGTERM would keep the
// search waiting.
func TestGatedTrialKilledAtOnce(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, Spec{
		Argv:       []string{"sh", "-c", "trap '' TERM; head -c 1 <&3; sleep 30"},
		StdoutPath: filepath.Join(dir, "out"), StderrPath: filepath.Join(dir, "err"),
		Grace: time.Minute, Gate: NewGate(),
	}, nil)
	if err != nil || !res.Canceled {
		t.Fatalf("Run = canceled %v, %v; want canceled", res.Canceled, err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %v: it waited out its grace", took)
	}
}

// A gate opened before its trial has started lets the trial through at
// once: the opener need not wait for the process.
func TestGateOpenedBeforeItsTrial(t *testing.T) {
	gate := NewGate()
	if !gate.Open() {
		t.Fatal("Open before the trial = false, want true")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := gated(t, ctx, gate, "0", time.Minute)
	if res.Canceled || res.ExitCode != 0 || !strings.Contains(string(res.StdoutTail), "through the gate") {
		t.Fatalf("exit %d, canceled %v, stdout %q: want it through at once", res.ExitCode, res.Canceled, res.StdoutTail)
	}
}

// A gate variable batchfit inherited is no trial's: an ungated trial's
// environment goes without it.
func TestUngatedTrialHasNoGateVariable(t *testing.T) {
	dir := t.TempDir()
	res, err := Run(context.Background(), Spec{
		Argv:       []string{"sh", "-c", `echo "gate=${BATCHFIT_GATE_FD-none}"`},
		Env:        []string{"PATH=" + os.Getenv("PATH"), GateEnv + "=3:1"},
		StdoutPath: filepath.Join(dir, "out"), StderrPath: filepath.Join(dir, "err"),
	}, nil)
	if err != nil || !strings.Contains(string(res.StdoutTail), "gate=none") {
		t.Fatalf("Run = %q, %v; want no gate variable", res.StdoutTail, err)
	}
}
