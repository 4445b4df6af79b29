package probe

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/trial"
)

// A jaxlib that reads a bare memory fraction as "preallocate, then grow
// into the whole device" gives a trial more than the named card: the
// first trial's pool says so, it runs again with the fraction written as
// a fixed pool (START-CAP), and so do all trials after it. A jaxlib that
// holds a bare fraction keeps it.
func TestPoolThatGrowsIsFixed(t *testing.T) {
	const gib = 1 << 30
	const total, limit = 80 * gib, 24 * gib
	for _, grows := range []bool{true, false} {
		var mu sync.Mutex
		var fractions []string
		p := New(Config{
			Command: []string{"python3", "train.py", "{}"}, LogDir: t.TempDir(),
			Framework: adapter.JAX{}, MemoryLimit: limit, DeviceTotal: total, WholeProcess: true,
			Executor: ExecutorFunc(func(_ context.Context, spec trial.Spec, _ trial.Watcher) (trial.Result, error) {
				f, _ := adapter.Lookup(spec.Env, adapter.XLAFractionEnv)
				mu.Lock()
				fractions = append(fractions, f)
				mu.Unlock()
				start, cap, fixed := strings.Cut(f, "-")
				if !fixed {
					cap = start
				}
				share, err := strconv.ParseFloat(cap, 64)
				if err != nil {
					t.Errorf("fraction %q: %v", f, err)
				}
				pool := uint64(share * total)
				if grows && !fixed {
					pool = total
				}
				report, _ := adapter.Lookup(spec.Env, adapter.ReportEnv)
				ev := adapter.Event{Event: "exit", Framework: "jax", MaxAllocated: 4 * gib, MemoryLimit: pool,
					Devices: []adapter.DeviceMemory{{Index: 0, Peak: 4 * gib, Limit: pool, Pool: pool}}}
				return trial.Result{}, adapter.Append(report, ev)
			}),
		})
		for _, size := range []int{8, 16} {
			if _, err := p.Probe(context.Background(), search.Request{Sizes: []int{size}}); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"0.225", "0.225"}
		if grows {
			want = []string{"0.225", "0.225-0.225", "0.225-0.225"}
		}
		if strings.Join(fractions, " ") != strings.Join(want, " ") {
			t.Errorf("grows %v: fractions %q, want %q", grows, fractions, want)
		}
		if n := len(p.Trials()); n != len(want) {
			t.Errorf("grows %v: %d trials, want %d", grows, n, len(want))
		}
	}
}
