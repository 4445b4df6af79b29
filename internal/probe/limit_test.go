package probe

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/sim"
)

// With the limit held for the whole process, the search finds the largest
// size whose process, CUDA context included, fits the limit, as on a real
// card of that size; every trial that ran stayed within it by NVML; and
// the allocator was capped at the limit less what lies outside it.
func TestWholeProcessLimit(t *testing.T) {
	rng := rand.New(rand.NewSource(20261130))
	card := sim.H100()
	for i := range 6 {
		w := sim.RandomWorkload(rng)
		w.StepSleep = 0
		fraction := 0.2 + 0.1*float64(i%3)
		limit := uint64(fraction * float64(card.Total))
		want := w.TrueMaxWholeProcess(card, limit, 1, 4096, 1)
		allocatorOnly := w.TrueMax(card, fraction, 1, 4096, 1)
		res, p, err := simSearchScope(t, w, card, search.Config{Min: 1, Max: 4096, MultipleOf: 1, Strategy: search.Model}, fraction, true)
		if err != nil {
			t.Fatalf("workload %d (%s): %v", i, w.Name, err)
		}
		if res.Max != want {
			t.Errorf("workload %d (%s): answer %d, truth for the whole process %d (allocator only: %d)", i, w.Name, res.Max, want, allocatorOnly)
		}
		if want > allocatorOnly {
			t.Errorf("workload %d: the whole-process truth %d is above the allocator's %d", i, want, allocatorOnly)
		}
		capped := false
		for _, tr := range p.Trials() {
			if tr.Outcome.Fits() && tr.Device > limit {
				t.Errorf("workload %d: trial %d at %d ran with %d bytes by NVML, above the limit %d", i, tr.N, tr.Size, tr.Device, limit)
			}
			if tr.AllocatorCap > 0 {
				capped = true
				if tr.AllocatorCap != limit-w.Context {
					t.Errorf("workload %d: trial %d's allocator cap %d, want the limit less the context, %d", i, tr.N, tr.AllocatorCap, limit-w.Context)
				}
			}
		}
		if !capped {
			t.Errorf("workload %d: no trial had its allocator capped below the limit", i)
		}
		t.Logf("workload %d %-16s limit %.0f %%: whole process %d, allocator only %d, %d trials", i, w.Name, 100*fraction, want, allocatorOnly, len(res.Trials))
	}
}

// A trial that ran but held more than the limit, counting what lies outside
// its allocator, did not fit; when its allocator had been allowed more than
// the card leaves it (the first trial, before anything was measured), it is
// to run again with the cap it measured.
func TestHoldToLimitWholeProcess(t *testing.T) {
	const gib = 1 << 30
	ok := classify.Result{Outcome: classify.OK, Reason: "exit status 0"}
	used := adapter.Summary{MaxReserved: 1}
	for _, tc := range []struct {
		name          string
		whole         bool
		reserved, dev uint64
		allocCap      uint64
		wantOOM       bool
		wantRecap     bool
	}{
		{"within the limit", true, 23 * gib, 23*gib + gib/2, 24 * gib, false, false},
		{"over it, allocator allowed the whole limit", true, 23*gib + gib/2, 24*gib + gib/4, 24 * gib, true, true},
		{"over it with the measured cap", true, 23*gib + gib/2, 24*gib + gib/4, 23*gib + gib/4, true, false},
		{"allocator scope ignores what lies outside", false, 23*gib + gib/2, 24*gib + gib/4, 24 * gib, false, false},
	} {
		p := New(Config{MemoryLimit: 24 * gib, WholeProcess: tc.whole, Framework: adapter.Torch{}})
		c, recap := p.holdToLimit(ok, adapter.Peaks{Allocated: tc.reserved - gib/8, Reserved: tc.reserved}, used, tc.dev, tc.allocCap)
		if (c.Outcome == classify.OOM) != tc.wantOOM || recap != tc.wantRecap {
			t.Errorf("%s: %s (%s), recap %v; want oom %v, recap %v", tc.name, c.Outcome, c.Reason, recap, tc.wantOOM, tc.wantRecap)
		}
		if tc.wantOOM && !strings.Contains(c.Reason, "outside the allocator") {
			t.Errorf("%s: reason %q does not say what lay outside the allocator", tc.name, c.Reason)
		}
	}
}

// Under --framework auto and a whole-process limit, once a trial reported
// torch, only torch's variable carries the cap the measurement fixed: JAX's
// and TensorFlow's keep the first trial's values, so a fork server started
// for the first trial's environment serves the later ones.
func TestLimitEnvCapsOnlyTheReportedFramework(t *testing.T) {
	const gib = 1 << 30
	p := New(Config{Command: []string{"python3", "train.py", "{}"}, Framework: adapter.Python{},
		MemoryLimit: 24 * gib, DeviceTotal: 140 * gib, WholeProcess: true})
	first := p.limitEnv(nil, p.allocatorCap())
	p.noteDevice(adapter.Peaks{Allocated: 20 * gib, Reserved: 21 * gib}, 21*gib+760<<20, 139*gib+800<<20, "torch")
	later := p.limitEnv(nil, p.allocatorCap())
	for _, key := range []string{adapter.XLAFractionEnv, adapter.TFLimitEnv} {
		a, _ := adapter.Lookup(first, key)
		b, _ := adapter.Lookup(later, key)
		if a == "" || a != b {
			t.Errorf("%s: first trial %q, later %q: want the same", key, a, b)
		}
	}
	a, _ := adapter.Lookup(first, adapter.AllocConfEnv)
	b, _ := adapter.Lookup(later, adapter.AllocConfEnv)
	if a == b || !strings.Contains(b, "per_process_memory_fraction:") {
		t.Errorf("torch's cap: first %q, later %q: want the measured cap later", a, b)
	}
}
