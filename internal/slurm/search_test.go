package slurm

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/sim"
	"github.com/batchfit/batchfit/internal/testutil/slurmtest"
)

// simSearch runs a whole search of the simulated workload w, each trial a
// real simulated training process started by exec (nil: locally).
func simSearch(t *testing.T, exec probe.Executor, w sim.Workload, card sim.Card, cfg search.Config, slots [][]int) (search.Result, *probe.Prober) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	card.Dir = t.TempDir() // the simulated GPUs' shared state; this machine is the node
	p := probe.New(probe.Config{
		Command:   sim.Command(exe, card, w),
		Env:       os.Environ(),
		Steps:     2,
		Timeout:   time.Minute,
		Grace:     time.Second,
		LogDir:    t.TempDir(),
		Executor:  exec,
		Slots:     slots,
		Framework: sim.Framework{},
	})
	res, err := search.Run(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	return res, p
}

// The acceptance test: a bisection through the cluster, ten trials and
// more, finds the simulator's truth, the same answer as local trials.
func TestClusterSearchMatchesLocal(t *testing.T) {
	t.Parallel()
	e, rec, _ := clusterExecutor(t, Options{})
	w := sim.ResNet50()
	w.StepSleep = 0
	card := sim.H100()
	cfg := search.Config{Min: 8, Max: 2048, MultipleOf: 8, Start: 64, Strategy: search.Bisect}
	truth := w.TrueMax(card, 1, cfg.Min, cfg.Max, cfg.MultipleOf)

	local, _ := simSearch(t, nil, w, card, cfg, nil)
	res, p := simSearch(t, e, w, card, cfg, nil)
	if res.Max != truth || local.Max != truth {
		t.Errorf("through Slurm %d, locally %d, simulator's truth %d", res.Max, local.Max, truth)
	}
	if n := len(res.Trials); n < 10 {
		t.Errorf("the search took %d trials; the test wants a search of 10 or more", n)
	}
	if n := len(rec.submitted()); n != len(p.Trials()) {
		t.Errorf("%d jobs for %d trials", n, len(p.Trials()))
	}
	for _, tr := range p.Trials() {
		if tr.Allocated == 0 {
			t.Errorf("trial %d at %d: no memory figures from the adapter's report", tr.N, tr.Size)
		}
	}
	t.Logf("answer %d in %d trials (%d rounds)", res.Max, len(res.Trials), res.Rounds)
}

// overlap watches squeue's answers and records the most jobs seen running
// at once.
type overlap struct {
	Commands
	mu      sync.Mutex
	running map[string]bool
	most    int
}

func (o *overlap) Run(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	stdout, stderr, err := o.Commands.Run(ctx, name, args...)
	if name == "squeue" && err == nil && len(args) >= 3 && args[1] == "-j" {
		o.mu.Lock()
		o.running[args[2]] = phaseOf(string(bytes.TrimSpace(stdout))) == running
		n := 0
		for _, r := range o.running {
			if r {
				n++
			}
		}
		o.most = max(o.most, n)
		o.mu.Unlock()
	}
	return stdout, stderr, err
}

// Two sizes a round on two slots: the jobs run side by side on the node,
// each on the GPU Slurm gave it, and the answer is still exact. Not
// parallel with other tests: their jobs would take the node's CPUs.
func TestClusterParallelSearch(t *testing.T) {
	c := slurmtest.Shared(t)
	o := &overlap{Commands: Exec{Env: c.Env}, running: map[string]bool{}}
	e, _, _ := clusterExecutor(t, Options{Commands: o, GPUsPerTrial: 1})
	w := sim.ResNet50()
	// Long enough steps that two jobs are seen running together.
	w.StepSleep = 400 * time.Millisecond
	card := sim.H100()
	card.Count = slurmtest.GPUs // the job's CUDA_VISIBLE_DEVICES names one of the node's
	cfg := search.Config{Min: 8, Max: 2048, MultipleOf: 8, Start: 256, Strategy: search.Bisect, Parallel: 2}
	truth := w.TrueMax(card, 1, cfg.Min, cfg.Max, cfg.MultipleOf)

	res, p := simSearch(t, e, w, card, cfg, [][]int{{0, 1}, {2, 3}})
	if res.Max != truth {
		t.Errorf("answer %d, simulator's truth %d", res.Max, truth)
	}
	if o.most < 2 {
		t.Errorf("at most %d job ran at a time; want two side by side", o.most)
	}
	t.Logf("answer %d in %d trials, %d rounds; %d trials", res.Max, len(res.Trials), res.Rounds, len(p.Trials()))
}
