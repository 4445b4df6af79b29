package probe

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/trial"
)

// A jaxlib that reads a bare memory fraction as "preallocate, then grow
// into the whole device" gives a trial more than the named card: each
// trial whose pool says so, side by side ones too, runs again, and all
// trials from then on get START-CAP: the card's pool, growing only into
// the card. A jaxlib that holds a bare fraction keeps it.
func TestPoolThatGrowsIsCapped(t *testing.T) {
	const gib = 1 << 30
	const total, limit = 80 * gib, 24 * gib
	for _, tc := range []struct {
		grows   bool
		version string
	}{
		{true, "jax 0.12.0, jaxlib 0.12.0"},
		{false, "jax 0.12.0, jaxlib 0.12.0"},
		// A jaxlib known to hold a bare fraction (and to refuse START-CAP)
		// is never given START-CAP, whatever its pool says.
		{true, "jax 0.11.2, jaxlib 0.11.2"},
	} {
		grows := tc.grows
		var mu sync.Mutex
		var fractions []string
		// The first two trials run at once: each ends after both started.
		both := make(chan struct{})
		p := New(Config{
			Command: []string{"python3", "train.py", "{}"}, LogDir: t.TempDir(),
			Framework: adapter.JAX{}, FrameworkVersion: tc.version, MemoryLimit: limit, DeviceTotal: total, WholeProcess: true,
			Slots: [][]int{nil, nil},
			Executor: ExecutorFunc(func(_ context.Context, spec trial.Spec, _ trial.Watcher) (trial.Result, error) {
				f, _ := adapter.Lookup(spec.Env, adapter.XLAFractionEnv)
				mu.Lock()
				if fractions = append(fractions, f); len(fractions) == 2 {
					close(both)
				}
				mu.Unlock()
				<-both
				start, cap, capped := strings.Cut(f, "-")
				if !capped {
					cap = start
				}
				share, err := strconv.ParseFloat(cap, 64)
				if err != nil {
					t.Errorf("fraction %q: %v", f, err)
				}
				pool := uint64(share * total)
				if grows && !capped {
					pool = total
				}
				report, _ := adapter.Lookup(spec.Env, adapter.ReportEnv)
				ev := adapter.Event{Event: "exit", Framework: "jax", MaxAllocated: 4 * gib, MemoryLimit: pool,
					Devices: []adapter.DeviceMemory{{Index: 0, Peak: 4 * gib, Limit: pool, Pool: pool}}}
				return trial.Result{}, adapter.Append(report, ev)
			}),
		})
		// Two at once, then one: both of the first grew.
		for _, sizes := range [][]int{{8, 16}, {32}} {
			if _, err := p.Probe(context.Background(), search.Request{Sizes: sizes}); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(fractions)
		want := []string{"0.225", "0.225", "0.225"}
		if grows && !adapter.JAXHoldsBareFraction(tc.version) {
			want = []string{"0.225", "0.225", "0.225-0.3", "0.225-0.3", "0.225-0.3"}
		}
		if strings.Join(fractions, " ") != strings.Join(want, " ") {
			t.Errorf("grows %v, %s: fractions %q, want %q", grows, tc.version, fractions, want)
		}
		if n := len(p.Trials()); n != len(want) {
			t.Errorf("grows %v, %s: %d trials, want %d", grows, tc.version, n, len(want))
		}
	}
}
