package search

import (
	"context"
	"math"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

// TestCapacityWindow: the model expects the boundary's peak within the
// capacity less what lies outside the figure; a framework's own pool limit
// (JAX's bytes_limit) replaces the capacity when it is smaller, and, like an
// allocator cap, leaves the CUDA context outside.
func TestCapacityWindow(t *testing.T) {
	ok := func(size int, m Memory) Observation { return Observation{Size: size, Outcome: classify.OK, Memory: m} }
	oom := func(size int, m Memory) Observation { return Observation{Size: size, Outcome: classify.OOM, Memory: m} }
	const card, pool = 141 * gib, 105 * gib
	for _, tc := range []struct {
		name     string
		cfg      Config
		belief   []Observation
		cLo, cHi float64
	}{
		{
			name:   "torch on the whole card, context unknown",
			cfg:    Config{Capacity: 80 * gib},
			belief: []Observation{ok(8, Memory{Allocated: 2 * gib}), ok(16, Memory{Allocated: 3 * gib})},
			cLo:    80*gib - allocatedOverheadHi, cHi: 80 * gib,
		},
		{
			name: "torch on the whole card, context measured",
			cfg:  Config{Capacity: 80 * gib},
			belief: []Observation{
				ok(8, Memory{Allocated: 2 * gib, Reserved: 2 * gib, Device: 2*gib + 500*mib}),
				ok(16, Memory{Allocated: 3 * gib, Reserved: 3 * gib, Device: 3*gib + 600*mib}),
			},
			cLo: 80*gib - 500*mib - allocatorSlackHi, cHi: 80*gib - 500*mib,
		},
		{
			name: "torch under an allocator cap",
			cfg:  Config{Capacity: 24 * gib, AllocatorCap: true},
			belief: []Observation{
				ok(8, Memory{Allocated: 2 * gib, Reserved: 2 * gib, Device: 2*gib + 500*mib}),
			},
			cLo: 24*gib - allocatorSlackHi, cHi: 24 * gib,
		},
		{
			name: "jax preallocating: its pool, not the card, and no context off it",
			cfg:  Config{Capacity: card},
			belief: []Observation{
				ok(8, Memory{Allocated: 2 * gib, Reserved: pool, Device: pool + 500*mib, Limit: pool}),
				ok(16, Memory{Allocated: 3 * gib, Reserved: pool, Device: pool + 500*mib, Limit: pool}),
			},
			cLo: pool - allocatorSlackHi, cHi: pool,
		},
		{
			name: "the smallest limit any trial reported, failures too",
			cfg:  Config{Capacity: card},
			belief: []Observation{
				ok(8, Memory{Allocated: 2 * gib, Limit: pool}),
				oom(4096, Memory{Limit: pool - gib}),
			},
			cLo: pool - gib - allocatorSlackHi, cHi: pool - gib,
		},
		{
			name:   "a limit above the capacity is not the capacity",
			cfg:    Config{Capacity: 24 * gib, AllocatorCap: true},
			belief: []Observation{ok(8, Memory{Allocated: 2 * gib, Limit: 24*gib + mib})},
			cLo:    24*gib - allocatorSlackHi, cHi: 24 * gib,
		},
		{
			name:   "device figures: the limit itself",
			cfg:    Config{Capacity: card},
			belief: []Observation{ok(8, Memory{Device: 2 * gib, Limit: pool}), ok(16, Memory{Device: 3 * gib, Limit: pool})},
			cLo:    pool, cHi: pool,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Min, tc.cfg.Max = 1, 4096
			d := &driver{probing: probing{g: tc.cfg.grid()}, cfg: tc.cfg, k: 1, belief: map[int]Observation{}}
			for _, o := range tc.belief {
				d.belief[o.Size] = o
			}
			lo, hi := d.bracket()
			v := d.view(lo, hi)
			if v.PeakLo != tc.cLo || v.PeakHi != tc.cHi {
				t.Errorf("window = [%.0f, %.0f] MiB, want [%.0f, %.0f] MiB", v.PeakLo/mib, v.PeakHi/mib, tc.cLo/mib, tc.cHi/mib)
			}
		})
	}
}

// TestJAXWorkload: a JAX program preallocates 75 % of the card, so the
// device's memory is flat and its own peak must fit in its pool. With the
// pool limit the trials report, the model finds the exact answer in a
// handful of trials; without it, it aims at the whole card and misses, and
// is still exact, through bisection.
func TestJAXWorkload(t *testing.T) {
	const card = 141 * gib
	pool := uint64(card * 3 / 4)
	w := withAnswer(pool, 0, 2*gib, 1900, 0.3)
	w.noise, w.seed = 2*mib, 1900
	jax := func(report bool) func(Memory) Memory {
		return func(m Memory) Memory {
			m.Reserved, m.Device = pool, pool+500*mib // flat, whatever the size
			if report {
				m.Limit = pool
			}
			return m
		}
	}
	cfg := Config{Min: 1, Max: 1 << 16, Capacity: card}
	for _, report := range []bool{true, false} {
		res, err := Run(context.Background(), cfg, &fakeProber{w: w, only: jax(report)})
		if err != nil {
			t.Fatal(err)
		}
		checkProof(t, res, cfg, 1900)
		t.Logf("limit reported %v: %d trials %v", report, len(res.Trials), sizesOf(res.Trials))
		if report && len(res.Trials) > 8 {
			t.Errorf("with the pool limit: %d trials, want ≤ 8 (2 re-check the proof)", len(res.Trials))
		}
	}
}

// TestFailureMovesWindow: a failure that refutes the capacity window moves
// the planner's window below it, to where the failure's own figures place
// the boundary; one that reports nothing leaves the capacity's window (it
// may be a flake), and the proof's rules keep the capacity's in any case.
func TestFailureMovesWindow(t *testing.T) {
	ok := func(size int, alloc float64) Observation {
		return Observation{Size: size, Outcome: classify.OK, Memory: Memory{Allocated: uint64(alloc * gib)}}
	}
	// 0.5 GiB + 1 GiB a sample; under a 24 GiB cap the trial at 20 held
	// 12.5 GiB, asked for 8 more and could take 6: it reached 18.5 GiB.
	failed := Observation{Size: 20, Outcome: classify.OOM,
		Failure: Failure{Request: 8 * gib, Allocated: 12.5 * gib, Reserved: 18 * gib, Free: 6 * gib}}
	cfg := Config{Min: 1, Max: 4096, Capacity: 24 * gib, AllocatorCap: true}
	for _, tc := range []struct {
		name     string
		fail     Observation
		cLo, cHi float64 // GiB
	}{
		{"figures place it", failed, 18.5 - 1, 18.5 + 1},
		// Only the request (XLA's message): the capacity's width, moved
		// down to end at 20's fitted peak, 20.5 GiB.
		{"the request alone", Observation{Size: 20, Outcome: classify.OOM, Failure: Failure{Request: 8 * gib}},
			20.5 - allocatorSlackHi/gib, 20.5},
		{"no figures: the capacity's", Observation{Size: 20, Outcome: classify.OOM}, 24 - allocatorSlackHi/gib, 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(cfg, nil)
			for _, o := range []Observation{ok(8, 8.5), ok(12, 12.5), tc.fail} {
				d.belief[o.Size] = o
			}
			lo, hi := d.bracket()
			v := d.planView(lo, hi)
			if math.Abs(v.PeakLo/gib-tc.cLo) > 0.01 || math.Abs(v.PeakHi/gib-tc.cHi) > 0.01 {
				t.Errorf("window = [%.2f, %.2f] GiB, want [%.2f, %.2f]", v.PeakLo/gib, v.PeakHi/gib, tc.cLo, tc.cHi)
			}
			if c := d.view(lo, hi); c.PeakLo != 24*gib-allocatorSlackHi || c.PeakHi != 24*gib {
				t.Errorf("the proof's window = [%.2f, %.2f] GiB, want the capacity's", c.PeakLo/gib, c.PeakHi/gib)
			}
		})
	}
}
