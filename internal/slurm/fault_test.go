package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/trial"
)

// fakeSlurm answers Slurm's commands from a function, for faults a real
// cluster will not produce on demand.
type fakeSlurm func(name string, args []string) (stdout, stderr string, err error)

func (f fakeSlurm) Run(_ context.Context, name string, args ...string) ([]byte, []byte, error) {
	if f == nil {
		return nil, nil, errors.New("no Slurm here")
	}
	o, e, err := f(name, args)
	return []byte(o), []byte(e), err
}

var errExit1 = errors.New("exit status 1")

// calls counts a fake's calls by program.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) add(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	return c.n[name]
}

func (c *calls) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// fakeExecutor is an executor on a fake Slurm with short waits.
func fakeExecutor(t *testing.T, f fakeSlurm) *Executor {
	t.Helper()
	e, err := New(Options{Commands: f, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.queryGrace = 200 * time.Millisecond
	e.stopWait = 200 * time.Millisecond
	e.killWait = 100 * time.Millisecond
	return e
}

func fakeSpec(t *testing.T) trial.Spec {
	dir := t.TempDir()
	return trial.Spec{Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}, Grace: 10 * time.Millisecond,
		StdoutPath: filepath.Join(dir, "t.out"), StderrPath: filepath.Join(dir, "t.err")}
}

// endedAs is a fake whose jobs leave the queue at once and end as scontrol
// line says; job IDs count up from 100.
func endedAs(c *calls, line func(id int) string) fakeSlurm {
	return func(name string, args []string) (string, string, error) {
		n := c.add(name)
		switch name {
		case "sbatch":
			return fmt.Sprintf("%d;cluster\n", 99+n), "", nil
		case "squeue", "scancel":
			return "", "", nil
		case "scontrol":
			id := 0
			fmt.Sscan(args[len(args)-1], &id)
			return line(id), "", nil
		}
		return "", "", errExit1
	}
}

func TestRerunsUntilGivingUp(t *testing.T) {
	for _, state := range []string{"PREEMPTED", "NODE_FAIL", "BOOT_FAIL"} {
		t.Run(state, func(t *testing.T) {
			var c calls
			e := fakeExecutor(t, endedAs(&c, func(int) string { return "JobState=" + state + " ExitCode=0:15" }))
			_, err := e.Run(context.Background(), fakeSpec(t), nil)
			var se *Error
			if !errors.As(err, &se) || se.State != state || se.Hint() == "" {
				t.Fatalf("err = %v, want an *Error in state %s with a hint", err, state)
			}
			if n := c.get("sbatch"); n != 1+maxReruns {
				t.Errorf("submitted %d times, want %d", n, 1+maxReruns)
			}
		})
	}
}

func TestRerunAfterPreemptionGivesTheRerunsResult(t *testing.T) {
	var c calls
	e := fakeExecutor(t, endedAs(&c, func(id int) string {
		if id == 100 {
			return "JobState=PREEMPTED ExitCode=0:15"
		}
		return "JobState=FAILED ExitCode=3:0"
	}))
	res, err := e.Run(context.Background(), fakeSpec(t), nil)
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("got %+v, %v; want exit status 3 from the second job", res, err)
	}
}

func TestEndStates(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    classify.Outcome
		signal  syscall.Signal
		errWant string // an *Error in this state
	}{
		{line: "JobState=COMPLETED ExitCode=0:0", want: classify.OK},
		{line: "JobState=FAILED ExitCode=1:0", want: classify.Crash},
		{line: "JobState=FAILED ExitCode=0:11", want: classify.Crash, signal: syscall.SIGSEGV},
		{line: "JobState=TIMEOUT ExitCode=0:15", want: classify.Timeout, signal: syscall.SIGTERM},
		// Slurm's cgroup OOM kill: its own signal number, or none at all.
		{line: "JobState=OUT_OF_MEMORY ExitCode=0:125", want: classify.HostOOM, signal: syscall.SIGKILL},
		{line: "JobState=OUT_OF_MEMORY ExitCode=0:0", want: classify.HostOOM, signal: syscall.SIGKILL},
		{line: "JobState=OUT_OF_MEMORY ExitCode=0:9", want: classify.HostOOM, signal: syscall.SIGKILL},
		{line: "JobState=CANCELLED ExitCode=0:15", errWant: "CANCELLED"},
		{line: "JobState=DEADLINE ExitCode=0:0", errWant: "DEADLINE"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			var c calls
			e := fakeExecutor(t, endedAs(&c, func(int) string { return tc.line }))
			res, err := e.Run(context.Background(), fakeSpec(t), nil)
			if tc.errWant != "" {
				var se *Error
				if !errors.As(err, &se) || se.State != tc.errWant || se.Hint() == "" {
					t.Fatalf("err = %v, want an *Error in state %s with a hint", err, tc.errWant)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := classify.Classify(classify.Input{ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut,
				Canceled: res.Canceled, HostOOMEvidence: res.HostOOMEvidence}).Outcome
			if got != tc.want || res.Signal != tc.signal {
				t.Errorf("outcome %s signal %v, want %s %v (result %+v)", got, res.Signal, tc.want, tc.signal, res)
			}
		})
	}
}

func TestEndFromSacctWhenScontrolForgot(t *testing.T) {
	var c calls
	e := fakeExecutor(t, func(name string, args []string) (string, string, error) {
		c.add(name)
		switch name {
		case "sbatch":
			return "7\n", "", nil
		case "squeue", "scontrol":
			return "", "slurm_load_jobs error: Invalid job id specified\n", errExit1
		case "sacct":
			return "FAILED|3:0|2026-11-29T20:31:14|2026-11-29T20:31:20\n", "", nil
		}
		return "", "", errExit1
	})
	res, err := e.Run(context.Background(), fakeSpec(t), nil)
	if err != nil || res.ExitCode != 3 || res.Duration != 6*time.Second {
		t.Fatalf("got %+v, %v; want exit status 3 over 6 s, from sacct", res, err)
	}
}

func TestEndUnknownSaysWhy(t *testing.T) {
	e := fakeExecutor(t, func(name string, args []string) (string, string, error) {
		switch name {
		case "sbatch":
			return "7\n", "", nil
		case "squeue", "scontrol":
			return "", "slurm_load_jobs error: Invalid job id specified\n", errExit1
		case "sacct":
			return "", "sacct: error: Slurm accounting storage is disabled\n", errExit1
		}
		return "", "", errExit1
	})
	_, err := e.Run(context.Background(), fakeSpec(t), nil)
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(se.Hint(), "MinJobAge") || !strings.Contains(err.Error(), "accounting storage is disabled") {
		t.Fatalf("err = %v (hint %q); want sacct's message and a hint about MinJobAge", err, hintOf(err))
	}
}

// A controller that stops answering: batchfit gives up after queryGrace,
// cancels the job and says so.
func TestSlurmStopsAnswering(t *testing.T) {
	var c calls
	e := fakeExecutor(t, func(name string, args []string) (string, string, error) {
		c.add(name)
		switch name {
		case "sbatch":
			return "7\n", "", nil
		case "scancel":
			return "", "", nil
		}
		return "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n", errExit1
	})
	_, err := e.Run(context.Background(), fakeSpec(t), nil)
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "Unable to contact") {
		t.Fatalf("err = %v, want an *Error with squeue's message", err)
	}
	if c.get("scancel") == 0 {
		t.Error("the job was not cancelled")
	}
}

func TestSubmitFailures(t *testing.T) {
	for _, tc := range []struct {
		stdout, stderr string
		err            error
		hint           string
	}{
		{stderr: "sbatch: error: invalid partition specified: nope\nsbatch: error: Batch job submission failed: Invalid partition name specified\n", err: errExit1, hint: "sinfo -s"},
		{stderr: "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n", err: errExit1, hint: "sacctmgr"},
		{stderr: "sbatch: error: Batch job submission failed: Requested node configuration is not available\n", err: errExit1, hint: "sinfo -o"},
		{stdout: "Submitted batch job 5\n", hint: ""},
	} {
		e := fakeExecutor(t, func(name string, args []string) (string, string, error) {
			if name == "sbatch" {
				return tc.stdout, tc.stderr, tc.err
			}
			t.Errorf("%s called after a failed sbatch", name)
			return "", "", errExit1
		})
		_, err := e.Run(context.Background(), fakeSpec(t), nil)
		var se *Error
		if !errors.As(err, &se) || !strings.Contains(se.Hint(), tc.hint) {
			t.Errorf("sbatch %q: err = %v, hint %q; want a hint with %q", tc.stderr, err, hintOf(err), tc.hint)
		}
		if tc.stderr != "" && !strings.Contains(err.Error(), strings.ReplaceAll(strings.TrimSpace(tc.stderr), "\n", "; ")) {
			t.Errorf("error %q does not carry sbatch's stderr on one line", err)
		}
	}
}

func TestNewWithoutSbatch(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New(Options{})
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(se.Hint(), "login node") {
		t.Fatalf("err = %v, want a hint to run where Slurm is", err)
	}
}

func TestBadSpecs(t *testing.T) {
	e := fakeExecutor(t, nil)
	dir := t.TempDir()
	for name, spec := range map[string]trial.Spec{
		"no command":     {StdoutPath: dir + "/o", StderrPath: dir + "/e"},
		"no logs":        {Argv: []string{"/bin/true"}},
		"no log dir":     {Argv: []string{"/bin/true"}, StdoutPath: dir + "/missing/o", StderrPath: dir + "/missing/e"},
		"name with '='":  {Argv: []string{"A=B"}, StdoutPath: dir + "/o", StderrPath: dir + "/e"},
		"newline in log": {Argv: []string{"/bin/true"}, StdoutPath: dir + "/o\n", StderrPath: dir + "/e"},
	} {
		_, err := e.Run(context.Background(), spec, nil)
		var se *trial.StartError
		if !errors.As(err, &se) {
			t.Errorf("%s: err = %v, want a *trial.StartError", name, err)
		}
	}
	if _, err := New(Options{Commands: fakeSlurm(nil), ExtraArgs: []string{"--comment=a\nb"}}); err == nil {
		t.Error("an sbatch argument with a newline was accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "o")); err == nil {
		t.Error("a log was created for a trial that cannot run")
	}
}

func hintOf(err error) string {
	var h interface{ Hint() string }
	if errors.As(err, &h) {
		return h.Hint()
	}
	return ""
}

// A cancelled trial is reported canceled even when Slurm cannot say how the
// job ended; and its job was cancelled before Run returned.
func TestCancelWithoutEndRecord(t *testing.T) {
	var c calls
	var mu sync.Mutex
	cancelled := false
	e := fakeExecutor(t, func(name string, args []string) (string, string, error) {
		c.add(name)
		mu.Lock()
		defer mu.Unlock()
		switch name {
		case "sbatch":
			return "7\n", "", nil
		case "squeue":
			if cancelled {
				return "", "", nil
			}
			return "RUNNING\n", "", nil
		case "scancel":
			cancelled = true
			return "", "", nil
		case "scontrol":
			return "", "slurm_load_jobs error: Invalid job id specified\n", errExit1
		}
		return "", "sacct: error: Slurm accounting storage is disabled\n", errExit1
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for c.get("squeue") < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	res, err := e.Run(ctx, fakeSpec(t), nil)
	if err != nil || !res.Canceled {
		t.Fatalf("got %+v, %v; want canceled", res, err)
	}
	if c.get("scancel") == 0 {
		t.Error("the job was not cancelled")
	}
}

// The job's whole logs are searched for error texts, not only their tails:
// an OOM followed by 200 KB of other output is still an OOM.
func TestWholeLogIsSearched(t *testing.T) {
	var c calls
	spec := fakeSpec(t)
	ended := endedAs(&c, func(int) string { return "JobState=FAILED ExitCode=1:0" })
	e := fakeExecutor(t, func(name string, args []string) (string, string, error) {
		if name == "sbatch" {
			// What the job writes on its node.
			log := "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.\n" +
				strings.Repeat("[rank0]: shutting down the process group, waiting for the other ranks\n", 3000)
			if err := os.WriteFile(spec.StderrPath, []byte(log), 0o644); err != nil {
				t.Error(err)
			}
			if err := os.WriteFile(spec.StdoutPath, []byte("step 1/3\n"), 0o644); err != nil {
				t.Error(err)
			}
		}
		return ended(name, args)
	})
	res, err := e.Run(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := classify.Input{ExitCode: res.ExitCode, Signal: res.Signal, Output: res.Output()}
	if got := classify.Classify(in); got.Outcome != classify.Crash {
		t.Fatalf("the tails alone classify %s (%s); the test no longer shows anything", got.Outcome, got.Reason)
	}
	in.Matches = res.Matches
	if got := classify.Classify(in); got.Outcome != classify.OOM || !strings.Contains(got.Reason, "Tried to allocate 8.00 GiB") {
		t.Errorf("classified %s (%s), want oom", got.Outcome, got.Reason)
	}
}
