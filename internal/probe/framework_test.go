package probe

import (
	"context"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/trial"
)

// A trial is judged on what the adapter reported: the framework's own peaks
// reach the search, a caught OOM fails the trial whatever its exit status,
// and a framework's peak above --memory-limit fails it.
func TestProbeReadsFrameworkReport(t *testing.T) {
	const gib = 1 << 30
	jax := adapter.Event{Event: "exit", Framework: "jax", MaxAllocated: 10 * gib, MemoryLimit: 105 * gib,
		Devices: []adapter.DeviceMemory{{Index: 0, Peak: 10 * gib, Limit: 105 * gib, Pool: 105 * gib}}}
	caught := jax
	caught.OOMsCaught = 1
	ownFraction := adapter.Event{Event: "exit", Framework: "jax", MaxAllocated: 30 * gib, MemoryLimit: 60 * gib}
	underLimit := adapter.Event{Event: "exit", Framework: "jax", MaxAllocated: 20 * gib, MemoryLimit: 24 * gib}
	for _, tc := range []struct {
		name   string
		ev     adapter.Event
		code   int
		limit  uint64
		want   search.Observation
		reason string
	}{
		{"jax's peak and pool", jax, 0, 0,
			search.Observation{Size: 64, Outcome: classify.OK, Memory: search.Memory{Allocated: 10 * gib, Reserved: 105 * gib, Limit: 105 * gib}}, "exit status 0"},
		{"an OOM caught, exit 0", caught, 0, 0,
			search.Observation{Size: 64, Outcome: classify.OOM, Memory: search.Memory{Allocated: 10 * gib, Reserved: 105 * gib, Limit: 105 * gib}}, "OOM caught by the program, exit status 0"},
		{"an OOM caught, exit 3", caught, 3, 0,
			search.Observation{Size: 64, Outcome: classify.OOM, Memory: search.Memory{Allocated: 10 * gib, Reserved: 105 * gib, Limit: 105 * gib}}, "OOM caught by the program, exit status 3"},
		{"under --memory-limit", underLimit, 0, 24 * gib,
			search.Observation{Size: 64, Outcome: classify.OK, Memory: search.Memory{Allocated: 20 * gib, Limit: 24 * gib}}, "exit status 0"},
		{"a fraction of the program's own, above --memory-limit", ownFraction, 0, 24 * gib,
			search.Observation{Size: 64, Outcome: classify.OOM, Memory: search.Memory{Allocated: 30 * gib, Limit: 60 * gib}}, "framework peak 30.00 GiB > 24.00 GiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			p := New(Config{
				Command: []string{"python3", "train.py", "{}"}, LogDir: t.TempDir(),
				Framework: adapter.Python{}, MemoryLimit: tc.limit, DeviceTotal: 141 * gib,
				Executor: ExecutorFunc(func(_ context.Context, spec trial.Spec, _ trial.Watcher) (trial.Result, error) {
					env = spec.Env
					report, _ := adapter.Lookup(spec.Env, adapter.ReportEnv)
					return trial.Result{ExitCode: tc.code}, adapter.Append(report, tc.ev)
				}),
			})
			obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{64}})
			if err != nil {
				t.Fatal(err)
			}
			if obs[0] != tc.want {
				t.Errorf("observation = %+v, want %+v", obs[0], tc.want)
			}
			if r := p.Trials()[0].Reason; !strings.Contains(r, tc.reason) {
				t.Errorf("reason %q, want %q", r, tc.reason)
			}
			if _, ok := adapter.Lookup(env, adapter.XLAFractionEnv); ok != (tc.limit > 0) {
				t.Errorf("%s set %v, want %v", adapter.XLAFractionEnv, ok, tc.limit > 0)
			}
		})
	}
}
