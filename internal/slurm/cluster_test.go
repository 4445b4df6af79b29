package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/testutil/slurmtest"
	"github.com/batchfit/batchfit/internal/trial"
)

// Trials that end by themselves, through the real cluster: the result
// carries their exit status and output, and classifies as a local trial's.
func TestClusterOutcomes(t *testing.T) {
	for _, tc := range []struct {
		script  string
		exit    int
		signal  syscall.Signal
		stdout  string
		stderr  string
		outcome classify.Outcome
		state   string
	}{
		{script: "ok.sh", exit: 0, stdout: "step 2/2 loss 4.15\n", outcome: classify.OK, state: "COMPLETED"},
		{script: "fail.sh", exit: 3, stdout: "loading config\n", stderr: "error: no such dataset: imagenet-42\n", outcome: classify.Crash, state: "FAILED"},
		{script: "oom.sh", exit: 1, stdout: "step 1/3\n", stderr: "torch.OutOfMemoryError: CUDA out of memory", outcome: classify.OOM, state: "FAILED"},
		{script: "segv.sh", exit: -1, signal: syscall.SIGSEGV, stdout: "about to crash\n", outcome: classify.Crash, state: "FAILED"},
	} {
		t.Run(tc.script, func(t *testing.T) {
			t.Parallel()
			e, rec, c := clusterExecutor(t, Options{})
			spec := testdataSpec(t, tc.script)
			res, err := e.Run(context.Background(), spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.exit || res.Signal != tc.signal || res.Canceled || res.TimedOut || res.HostOOMEvidence {
				t.Errorf("result %+v, want exit %d signal %v", res, tc.exit, tc.signal)
			}
			if !strings.HasSuffix(string(res.StdoutTail), tc.stdout) {
				t.Errorf("stdout tail %q, want it to end with %q", res.StdoutTail, tc.stdout)
			}
			if !strings.Contains(string(res.StderrTail), tc.stderr) {
				t.Errorf("stderr tail %q, want %q in it", res.StderrTail, tc.stderr)
			}
			got := classify.Classify(classify.Input{ExitCode: res.ExitCode, Signal: res.Signal, Output: res.Output()})
			if got.Outcome != tc.outcome {
				t.Errorf("classified %s (%s), want %s", got.Outcome, got.Reason, tc.outcome)
			}
			if res.Start.IsZero() || res.Duration < 0 {
				t.Errorf("start %v duration %v", res.Start, res.Duration)
			}
			jobs := rec.submitted()
			if len(jobs) != 1 {
				t.Fatalf("submitted %d jobs", len(jobs))
			}
			if st := jobState(t, c, jobs[0]); st != tc.state {
				t.Errorf("job state %s, want %s", st, tc.state)
			}
			if _, err := os.Stat(strings.TrimSuffix(spec.StdoutPath, ".out") + ".sbatch"); err != nil {
				t.Errorf("the batch script is not beside the logs: %v", err)
			}
		})
	}
}

// The trial's argv, environment and working directory arrive exactly, odd
// characters and all; with GPUs asked for, the job sees the GPUs Slurm gave
// it (the test node's fake ones).
func TestClusterPassesArgvEnvAndDir(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, gpus := range []int{0, 2} {
		t.Run(map[int]string{0: "no gres", 2: "gres gpu:2"}[gpus], func(t *testing.T) {
			t.Parallel()
			e, rec, c := clusterExecutor(t, Options{GPUsPerTrial: gpus})
			// Log and work paths with a space, a quote and a % (sbatch
			// expands %j in --output).
			logs := filepath.Join(t.TempDir(), "logs 'x' 100%j")
			dir := filepath.Join(t.TempDir(), "work dir $x")
			for _, d := range []string{logs, dir} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			spec := trial.Spec{
				Argv:       append([]string{exe, dumpCommand}, oddArgs...),
				Env:        oddEnv,
				Dir:        dir,
				Timeout:    time.Minute,
				StdoutPath: filepath.Join(logs, "trial.out"),
				StderrPath: filepath.Join(logs, "trial.err"),
			}
			res, err := e.Run(context.Background(), spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 {
				t.Fatalf("exit %d, stderr %s", res.ExitCode, res.StderrTail)
			}
			out, err := os.ReadFile(spec.StdoutPath)
			if err != nil {
				t.Fatal(err)
			}
			d := readDump(t, out)
			if !slices.Equal(d.Args, append([]string{dumpCommand}, oddArgs...)) {
				t.Errorf("args = %q\nwant %q", d.Args, append([]string{dumpCommand}, oddArgs...))
			}
			if d.Dir != dir {
				t.Errorf("dir = %q, want %q", d.Dir, dir)
			}
			// The trial's variables, exactly; besides them only the job's own.
			s := script{env: oddEnv, gpus: gpus > 0}
			got := map[string]string{}
			var mine []string
			for _, kv := range d.Env {
				name, v, _ := strings.Cut(kv, "=")
				got[name] = v
				if !s.isOwned(name) {
					mine = append(mine, kv)
				}
			}
			sameEnv(t, mine, wantEnv(s, nil))
			id := rec.submitted()[0]
			if got["SLURM_JOB_ID"] != id {
				t.Errorf("SLURM_JOB_ID = %q, want the job's, %s", got["SLURM_JOB_ID"], id)
			}
			if gpus > 0 {
				if n := len(strings.Split(got["CUDA_VISIBLE_DEVICES"], ",")); n != gpus {
					t.Errorf("CUDA_VISIBLE_DEVICES = %q, want %d of the node's GPUs", got["CUDA_VISIBLE_DEVICES"], gpus)
				}
				out, err := c.Run(context.Background(), "scontrol", "-o", "show", "job", id)
				if err != nil || !strings.Contains(out, "gpu:2") {
					t.Errorf("the job did not ask for gpu:2: %v\n%s", err, out)
				}
			} else if got["CUDA_VISIBLE_DEVICES"] != "7" {
				t.Errorf("CUDA_VISIBLE_DEVICES = %q, want the trial's, 7", got["CUDA_VISIBLE_DEVICES"])
			}
		})
	}
}

// batchfit's own timer: a trial that runs past spec.Timeout is cancelled
// (SIGTERM) and reported as timed out, and its job is gone.
func TestClusterTimeout(t *testing.T) {
	t.Parallel()
	e, rec, c := clusterExecutor(t, Options{})
	spec := testdataSpec(t, "hang.sh")
	spec.Timeout = time.Second
	res, err := e.Run(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Canceled || res.Signal != syscall.SIGTERM {
		t.Errorf("result %+v, want timed out by SIGTERM", res)
	}
	if got := classify.Classify(classify.Input{TimedOut: res.TimedOut, Signal: res.Signal}).Outcome; got != classify.Timeout {
		t.Errorf("classified %s", got)
	}
	if !strings.Contains(string(res.StdoutTail), "started") {
		t.Errorf("stdout tail %q", res.StdoutTail)
	}
	assertGone(t, c, rec.submitted()[0])
}

// Ctrl-C while a trial runs: the job is cancelled and gone when Run
// returns. A trial that ignores SIGTERM is killed after the grace period.
func TestClusterCancelRunning(t *testing.T) {
	for _, script := range []string{"hang.sh", "ignoreterm.sh"} {
		t.Run(script, func(t *testing.T) {
			t.Parallel()
			e, rec, c := clusterExecutor(t, Options{})
			spec := testdataSpec(t, script)
			spec.Grace = 500 * time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				// Cancel once the trial has really started on the node.
				for ctx.Err() == nil {
					if b, _ := os.ReadFile(spec.StdoutPath); strings.Contains(string(b), "started") {
						cancel()
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			res, err := e.Run(ctx, spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]syscall.Signal{"hang.sh": syscall.SIGTERM, "ignoreterm.sh": syscall.SIGKILL}[script]
			if !res.Canceled || res.TimedOut || res.Signal != want {
				t.Errorf("result %+v, want canceled, ended by %v", res, want)
			}
			id := rec.submitted()[0]
			assertGone(t, c, id)
			if st := jobState(t, c, id); phaseOf(st) != finished {
				t.Errorf("job state %s", st)
			}
		})
	}
}

// Ctrl-C while the job waits in the queue: it is cancelled before it ever
// runs.
func TestClusterCancelPending(t *testing.T) {
	t.Parallel()
	e, rec, c := clusterExecutor(t, Options{ExtraArgs: []string{"--begin=now+1hour"}})
	spec := testdataSpec(t, "ok.sh")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(rec.submitted()) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	res, err := e.Run(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Canceled {
		t.Errorf("result %+v, want canceled", res)
	}
	id := rec.submitted()[0]
	assertGone(t, c, id)
	if st := jobState(t, c, id); st != "CANCELLED" {
		t.Errorf("job state %s, want CANCELLED", st)
	}
	if _, err := os.Stat(spec.StdoutPath); err == nil {
		t.Error("the trial ran")
	}
}

func TestClusterRejectsBadPartition(t *testing.T) {
	t.Parallel()
	e, rec, _ := clusterExecutor(t, Options{Partition: "nope"})
	_, err := e.Run(context.Background(), testdataSpec(t, "ok.sh"), nil)
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "nvalid partition") || !strings.Contains(se.Hint(), "sinfo") {
		t.Fatalf("err = %v (hint %q), want sbatch's complaint about the partition and a hint", err, hintOf(err))
	}
	if n := len(rec.submitted()); n != 0 {
		t.Errorf("%d jobs submitted", n)
	}
}

// flaky fails some calls of one program the way an overloaded controller
// does, and passes the rest to the real cluster.
type flaky struct {
	Commands
	program string
	fail    int // calls left to fail
	preempt string
}

func (f *flaky) Run(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	if name == f.program && f.fail > 0 {
		f.fail--
		return nil, []byte("slurm_load_jobs error: Socket timed out on send/recv operation\n"), errExit1
	}
	stdout, stderr, err := f.Commands.Run(ctx, name, args...)
	if name == "scontrol" && f.preempt != "" && args[len(args)-1] == f.preempt {
		stdout = []byte(strings.Replace(string(stdout), "JobState=COMPLETED", "JobState=PREEMPTED", 1))
	}
	return stdout, stderr, err
}

// A controller that misses a few polls does not lose the trial.
func TestClusterSurvivesSqueueHiccups(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t)
	f := &flaky{Commands: Exec{Env: c.Env}, program: "squeue", fail: 3}
	e, _, _ := clusterExecutor(t, Options{Commands: f})
	res, err := e.Run(context.Background(), testdataSpec(t, "fail.sh"), nil)
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("got %+v, %v; want exit status 3", res, err)
	}
}

// A preempted job is run again; the trial's result is the rerun's.
func TestClusterRerunsPreempted(t *testing.T) {
	t.Parallel()
	c := slurmtest.Shared(t)
	f := &flaky{Commands: Exec{Env: c.Env}}
	rec := &recorder{Commands: f}
	e, _, _ := clusterExecutor(t, Options{Commands: commandsFunc(func(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
		stdout, stderr, err := rec.Run(ctx, name, args...)
		if name == "sbatch" && f.preempt == "" && err == nil {
			f.preempt = rec.submitted()[0] // the first job "was preempted"
		}
		return stdout, stderr, err
	})})
	res, err := e.Run(context.Background(), testdataSpec(t, "ok.sh"), nil)
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.StdoutTail), "step 2/2") {
		t.Fatalf("got %+v, %v; want the rerun's success", res, err)
	}
	if n := len(rec.submitted()); n != 2 {
		t.Errorf("%d jobs submitted, want 2", n)
	}
}

type commandsFunc func(ctx context.Context, name string, args ...string) ([]byte, []byte, error)

func (f commandsFunc) Run(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	return f(ctx, name, args...)
}
