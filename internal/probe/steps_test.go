package probe

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/trial"
)

// A trial the adapter stopped after its steps fits, says so, and its record
// keeps the peak after every step.
func TestStoppedTrial(t *testing.T) {
	var steps string
	exec := ExecutorFunc(func(ctx context.Context, spec trial.Spec, w trial.Watcher) (trial.Result, error) {
		steps, _ = adapter.Lookup(spec.Env, "BATCHFIT_STEPS")
		report, _ := adapter.Lookup(spec.Env, adapter.ReportEnv)
		err := adapter.Append(report, adapter.Event{Event: "exit", PID: 1, Torch: "2.11.0", Steps: 3,
			StepTimes: []float64{0.5, 0.5}, StepPeaks: []uint64{100, 200, 200}, Stopped: true})
		return trial.Result{Duration: time.Second}, err
	})
	p := New(Config{Command: []string{"python", "train.py"}, Steps: 3, LogDir: t.TempDir(), Executor: exec})
	obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{64}})
	if err != nil {
		t.Fatal(err)
	}
	if steps != "3" {
		t.Errorf("BATCHFIT_STEPS=%q, want 3", steps)
	}
	tr := p.Trials()[0]
	if obs[0].Outcome != classify.OK || tr.Reason != "stopped after 3 steps" || !slices.Equal(tr.StepPeaks, []uint64{100, 200, 200}) {
		t.Errorf("trial = %+v, want ok, stopped after 3 steps, the step peaks", tr)
	}
}

// --steps 0 leaves BATCHFIT_STEPS unset, also when inherited: the
// program's own end (a program that reads it as its step count would
// reject 0).
func TestStepsZero(t *testing.T) {
	p := New(Config{Steps: 0, Env: []string{"BATCHFIT_STEPS=5"}})
	if v, ok := adapter.Lookup(p.env(1, 8, 0, false, nil, 0, "/r"), "BATCHFIT_STEPS"); ok {
		t.Errorf("BATCHFIT_STEPS=%q, want it unset", v)
	}
}

// Every trial is told --worst-case, whatever it inherited.
func TestWorstCaseEnv(t *testing.T) {
	for _, tc := range []struct {
		off  bool
		want string
	}{{false, "1"}, {true, "0"}} {
		p := New(Config{Steps: 3, WorstCaseOff: tc.off, Env: []string{adapter.WorstCaseEnv + "=7"}})
		env := p.env(1, 8, 3, false, nil, 0, "/r")
		if v, _ := adapter.Lookup(env, adapter.WorstCaseEnv); v != tc.want {
			t.Errorf("off %v: %s=%q, want %q", tc.off, adapter.WorstCaseEnv, v, tc.want)
		}
		if n := strings.Count(strings.Join(env, "\n"), adapter.WorstCaseEnv+"="); n != 1 {
			t.Errorf("off %v: %s set %d times", tc.off, adapter.WorstCaseEnv, n)
		}
	}
}
