package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/sim"
	"github.com/batchfit/batchfit/internal/testutil/slurmtest"
	"github.com/batchfit/batchfit/internal/trial"
)

var _ probe.Executor = (*Executor)(nil)

// dumpCommand makes the test binary print what it was started with (dump),
// as a trial would see it.
const dumpCommand = "__slurm-dump"

func TestMain(m *testing.M) {
	// Trials re-execute this test binary: simulated training, or a dump.
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case sim.ChildCommand:
			os.Exit(sim.Main(os.Args[2:], os.Stdout, os.Stderr))
		case dumpCommand:
			os.Exit(dumpSelf())
		}
	}
	os.Exit(slurmtest.Main(m))
}

// dump is what a trial process saw.
type dump struct {
	Args []string // after argv[0]
	Env  []string
	Dir  string
}

func dumpSelf() int {
	dir, _ := os.Getwd()
	d := dump{Args: os.Args[1:], Env: os.Environ(), Dir: dir}
	if err := json.NewEncoder(os.Stdout).Encode(d); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func readDump(t *testing.T, data []byte) dump {
	t.Helper()
	var d dump
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("the trial's output is not a dump: %v\n%s", err, data)
	}
	return d
}

// testPoll is the executor's poll interval in tests.
const testPoll = 200 * time.Millisecond

// recorder passes commands through and keeps the job IDs sbatch returned.
type recorder struct {
	Commands
	mu   sync.Mutex
	jobs []string
}

func (r *recorder) Run(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	stdout, stderr, err := r.Commands.Run(ctx, name, args...)
	if name == "sbatch" && err == nil {
		r.mu.Lock()
		id, _, _ := strings.Cut(strings.TrimSpace(string(stdout)), ";")
		r.jobs = append(r.jobs, id)
		r.mu.Unlock()
	}
	return stdout, stderr, err
}

func (r *recorder) submitted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.jobs...)
}

// clusterExecutor returns an executor on the shared test cluster and the
// recorder of its jobs.
func clusterExecutor(t *testing.T, opts Options) (*Executor, *recorder, *slurmtest.Cluster) {
	t.Helper()
	c := slurmtest.Shared(t)
	rec := &recorder{Commands: Exec{Env: c.Env}}
	if opts.Commands != nil {
		rec.Commands = opts.Commands
	}
	opts.Commands = rec
	if opts.Poll == 0 {
		opts.Poll = testPoll
	}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e, rec, c
}

// testdataSpec runs testdata/<script> with logs in a fresh directory.
func testdataSpec(t *testing.T, script string, args ...string) trial.Spec {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	return trial.Spec{
		Argv:       append([]string{path}, args...),
		Env:        os.Environ(),
		Timeout:    time.Minute,
		Grace:      time.Second,
		StdoutPath: filepath.Join(logs, "trial.out"),
		StderrPath: filepath.Join(logs, "trial.err"),
	}
}

// jobState is the job's state as scontrol has it ("" when it does not know
// the job).
func jobState(t *testing.T, c *slurmtest.Cluster, id string) string {
	t.Helper()
	out, err := c.Run(context.Background(), "scontrol", "-o", "show", "job", id)
	if err != nil {
		t.Fatal(err)
	}
	end, err := parseScontrol(out)
	if err != nil {
		t.Fatal(err)
	}
	return end.State
}

// assertGone fails t if the job is still in the queue.
func assertGone(t *testing.T, c *slurmtest.Cluster, id string) {
	t.Helper()
	out, err := c.Run(context.Background(), "squeue", "-h", "-j", id, "-o", "%T")
	if err != nil && !strings.Contains(err.Error(), "Invalid job id") {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(out); s != "" {
		t.Errorf("job %s is still in the queue (%s)", id, s)
	}
}
