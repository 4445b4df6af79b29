package search

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

// smallWorkload has exactly the answer given (on a 24 GiB card, a 2 GiB
// fixed cost and a hidden 450 MiB context), for tests about edges.
func smallWorkload(answer int) workload {
	return withAnswer(24*gib, 450*mib, 2*gib, answer, 0.5)
}

func TestBounds(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		answer int // of the workload, before the grid and range
		want   int
	}{
		{"everything fits", Config{Min: 1, Max: 100}, 300, 100},
		{"everything fits, max a power of two", Config{Min: 1, Max: 128}, 300, 128},
		{"only min fits", Config{Min: 40, Max: 1000}, 40, 40},
		{"min equals max", Config{Min: 57, Max: 57}, 300, 57},
		{"odd min and max", Config{Min: 3, Max: 777}, 211, 211},
		{"odd min and max, answer is max", Config{Min: 3, Max: 777}, 777, 777},
		{"odd min, answer min", Config{Min: 37, Max: 777}, 37, 37},
		{"multiple of 8, min off the grid", Config{Min: 5, Max: 1000, MultipleOf: 8}, 211, 208},
		{"multiple of 8, max off the grid", Config{Min: 5, Max: 100, MultipleOf: 8}, 300, 96},
		{"multiple of 8, answer is the first grid point", Config{Min: 5, Max: 1000, MultipleOf: 8}, 9, 8},
		{"multiple of 3, large", Config{Min: 1, Max: 3000, MultipleOf: 3}, 1001, 999},
		{"largest max", Config{Min: 1, Max: MaxBatch}, 211, 211},
		{"largest max, everything fits", Config{Min: 1, Max: MaxBatch, MultipleOf: 1 << 20}, 1 << 31, MaxBatch},
		{"start above the answer", Config{Min: 1, Max: 1000, Start: 500}, 211, 211},
		{"start at max", Config{Min: 1, Max: 1000, Start: 1000}, 211, 211},
	}
	for _, tt := range tests {
		for _, strategy := range []Strategy{Model, Bisect} {
			for _, k := range []int{1, 3} {
				w := smallWorkload(tt.answer)
				cfg := tt.cfg
				cfg.Strategy, cfg.Parallel, cfg.Capacity = strategy, k, w.capacity
				t.Run(tt.name+"/"+string(strategy)+"/k="+string(rune('0'+k)), func(t *testing.T) {
					p := &fakeProber{w: w}
					res, err := Run(context.Background(), cfg, p)
					if err != nil {
						t.Fatal(err)
					}
					checkProof(t, res, cfg, tt.want)
					g := cfg.grid()
					for _, call := range p.calls {
						if len(call) > k {
							t.Errorf("round of %d sizes, parallel %d", len(call), k)
						}
						for _, s := range call {
							if s%g.Step != 0 || s < g.Min || s > g.Max {
								t.Errorf("probed %d: off the grid [%d, %d] step %d", s, g.Min, g.Max, g.Step)
							}
						}
					}
				})
			}
		}
	}
}

func TestNothingFits(t *testing.T) {
	for _, strategy := range []Strategy{Model, Bisect} {
		t.Run(string(strategy), func(t *testing.T) {
			w := smallWorkload(20)
			cfg := Config{Min: 21, Max: 400, MultipleOf: 4, Strategy: strategy, Capacity: w.capacity}
			res, err := Run(context.Background(), cfg, &fakeProber{w: w})
			if !errors.Is(err, ErrNothingFits) {
				t.Fatalf("error %v, want ErrNothingFits", err)
			}
			var nf *NothingFitsError
			if !errors.As(err, &nf) || nf.Observation.Size != 24 || nf.Observation.Outcome != classify.OOM {
				t.Fatalf("error %#v, want the oom at 24", err)
			}
			if res.Found || res.Max != 0 || len(res.Trials) == 0 {
				t.Errorf("result %+v", res)
			}
		})
	}
}

// TestBisectSizes pins the bisection's path: ×2 from the start, a last try
// at exactly Max, then halving; with k sizes per round, k-ary; and last the
// proof pair again, in as few rounds as k allows: the answer once more, and
// its first failure until it failed four times, as no memory model vouches
// for it.
func TestBisectSizes(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		answer int
		want   [][]int
	}{
		{"all fit", Config{Min: 1, Max: 100}, 300, [][]int{{1}, {2}, {4}, {8}, {16}, {32}, {64}, {100}, {100}}},
		{"grow then halve", Config{Min: 1, Max: 100}, 40, [][]int{{1}, {2}, {4}, {8}, {16}, {32}, {64}, {48}, {40}, {44}, {42}, {41}, {40}, {41}, {41}, {41}}},
		{"from a start", Config{Min: 1, Max: 100, Start: 30}, 40, [][]int{{30}, {60}, {45}, {37}, {41}, {39}, {40}, {40}, {41}, {41}, {41}}},
		{"k=3", Config{Min: 1, Max: 100, Parallel: 3}, 40, [][]int{{1, 2, 4}, {8, 16, 32}, {64, 100}, {40, 48, 56}, {42, 44, 46}, {41}, {40, 41, 41}, {41}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := smallWorkload(tt.answer)
			cfg := tt.cfg
			cfg.Strategy = Bisect
			p := &fakeProber{w: w}
			res, err := Run(context.Background(), cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(p.calls, tt.want, slices.Equal) {
				t.Errorf("calls %v\nwant  %v", p.calls, tt.want)
			}
			if res.Rounds != len(p.calls) {
				t.Errorf("rounds %d, calls %d", res.Rounds, len(p.calls))
			}
		})
	}
}

// TestModelWithoutCapacityBisects: without a capacity the model strategy
// has nothing to aim at and must search exactly like bisection.
func TestModelWithoutCapacityBisects(t *testing.T) {
	w := smallWorkload(211)
	bis, mod := &fakeProber{w: w}, &fakeProber{w: w}
	if _, err := Run(context.Background(), Config{Min: 1, Max: 1000, Strategy: Bisect}, bis); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Config{Min: 1, Max: 1000, Strategy: Model}, mod); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(bis.calls, mod.calls, slices.Equal) {
		t.Errorf("model without capacity %v\nbisect %v", mod.calls, bis.calls)
	}
}

// TestFailureKinds: every outcome that means "too large" bounds the search
// the same way.
func TestFailureKinds(t *testing.T) {
	for _, o := range []classify.Outcome{classify.OOM, classify.HostOOM, classify.SizeLimit, classify.Timeout} {
		t.Run(string(o), func(t *testing.T) {
			w := smallWorkload(1000)
			p := &fakeProber{w: w, script: func(size, _ int) (classify.Outcome, bool) {
				if size > 77 {
					return o, true
				}
				return "", false
			}}
			cfg := Config{Min: 1, Max: 500, Capacity: w.capacity}
			res, err := Run(context.Background(), cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			checkProof(t, res, cfg, 77)
		})
	}
}

func TestFlakyFailureCleared(t *testing.T) {
	// Three sizes a round: 1, 2, 4 | 8, 16, 32 | ... The trial at 16 fails
	// once (another process held memory, say) while 32 runs in the same
	// round: a contradiction. The re-run at 16 fits, so the flake is
	// dropped and the search finds the true answer.
	w := smallWorkload(211)
	p := &fakeProber{w: w, script: func(size, attempt int) (classify.Outcome, bool) {
		if size == 16 && attempt == 0 {
			return classify.OOM, true
		}
		return "", false
	}}
	cfg := Config{Min: 1, Max: 1000, Parallel: 3, Strategy: Bisect}
	res, err := Run(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	checkProof(t, res, cfg, 211)
	if len(res.NonMonotonic) != 0 {
		t.Errorf("conflicts %v, want none: the re-run cleared it", res.NonMonotonic)
	}
	i := slices.IndexFunc(res.Trials, func(o Observation) bool { return o.Size == 16 && o.Retry })
	if i < 0 || !res.Trials[i].Outcome.Fits() {
		t.Fatalf("no fitting re-run at 16 in %v", res.Trials)
	}
	if !slices.ContainsFunc(res.Trials, func(o Observation) bool { return o.Size == 16 && !o.Retry && o.Outcome == classify.OOM }) {
		t.Error("the flaky first result is not kept in Trials")
	}
	// Both sides of a contradiction within one round are new evidence, so
	// both are re-run, in one fresh round.
	if i := slices.IndexFunc(p.calls, func(c []int) bool { return slices.Equal(c, []int{16, 32}) }); i < 0 || !p.fresh[i] {
		t.Errorf("calls %v fresh %v: want a fresh re-run of 16 and 32", p.calls, p.fresh)
	}
}

func TestContradictionHolds(t *testing.T) {
	// A workload that fails at 16 every time, yet runs at 32 (and up to
	// 211): not monotone. The contradiction holds when re-run: it is
	// reported, and the search goes on above the size that ran, as
	// bisection would from there: the answer is the boundary above, 211.
	w := smallWorkload(211)
	p := &fakeProber{w: w, script: func(size, _ int) (classify.Outcome, bool) {
		if size == 16 {
			return classify.OOM, true
		}
		return "", false
	}}
	cfg := Config{Min: 1, Max: 1000, Parallel: 3, Strategy: Bisect}
	var told []Conflict
	cfg.OnEvent = func(ev Event) {
		if ev.Kind == EventConflict {
			told = append(told, ev.Conflict)
		}
	}
	res, err := Run(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	checkProof(t, res, cfg, 211)
	if !slices.Equal(told, res.NonMonotonic) {
		t.Errorf("conflicts told as they held %+v, want %+v", told, res.NonMonotonic)
	}
	if len(res.NonMonotonic) != 1 {
		t.Fatalf("conflicts %+v, want one", res.NonMonotonic)
	}
	c := res.NonMonotonic[0]
	if c.Ok.Size != 32 || !c.Ok.Outcome.Fits() || c.Fail.Size != 16 || c.Fail.Outcome != classify.OOM {
		t.Errorf("conflict %+v, want ok at 32 against oom at 16", c)
	}
}

func TestContradictionInMargin(t *testing.T) {
	// The margin phase runs sizes below the answer. One of them fails
	// once: re-run, cleared, and the answer stands. If it keeps failing,
	// the answer still stands (it ran twice), the conflict is reported,
	// and the margin falls below the failure.
	for _, persistent := range []bool{false, true} {
		w := smallWorkload(211)
		cfg := Config{Min: 1, Max: 1000, Capacity: w.capacity, MarginPercent: 20}
		clean, err := Run(context.Background(), cfg, &fakeProber{w: w})
		if err != nil {
			t.Fatal(err)
		}
		if clean.Margin == 0 {
			t.Fatal("no margin in the clean run")
		}
		p := &fakeProber{w: w, script: func(size, attempt int) (classify.Outcome, bool) {
			if size == clean.Margin && (persistent || attempt == 0) {
				return classify.OOM, true
			}
			return "", false
		}}
		res, err := Run(context.Background(), cfg, p)
		if err != nil {
			t.Fatal(err)
		}
		if !persistent {
			checkProof(t, res, cfg, 211)
			if res.Margin != clean.Margin || len(res.NonMonotonic) != 0 {
				t.Errorf("flaky: margin %d (want %d), conflicts %v", res.Margin, clean.Margin, res.NonMonotonic)
			}
			continue
		}
		checkProof(t, res, cfg, 211)
		if res.Margin != clean.Margin-1 {
			t.Errorf("persistent: margin %d, want %d, below the failure", res.Margin, clean.Margin-1)
		}
		if len(res.NonMonotonic) != 1 || res.NonMonotonic[0].Fail.Size != clean.Margin {
			t.Errorf("persistent: conflicts %+v", res.NonMonotonic)
		}
	}
}

func TestCrashStops(t *testing.T) {
	w := smallWorkload(211)
	p := &fakeProber{w: w, script: func(size, _ int) (classify.Outcome, bool) {
		if size >= 64 {
			return classify.Crash, true
		}
		return "", false
	}}
	res, err := Run(context.Background(), Config{Min: 1, Max: 1000, Strategy: Bisect}, p)
	var ce *CrashError
	if !errors.As(err, &ce) || ce.Observation.Size != 64 {
		t.Fatalf("error %v, want a crash at 64", err)
	}
	if last := res.Trials[len(res.Trials)-1]; last.Size != 64 || last.Outcome != classify.Crash {
		t.Errorf("last trial %+v, want the crash", last)
	}
	if res.Found || len(p.calls) != 7 {
		t.Errorf("found %v after %d calls, want it to stop at the crash", res.Found, len(p.calls))
	}
}

func TestCanceled(t *testing.T) {
	w := smallWorkload(211)
	t.Run("canceled trial", func(t *testing.T) {
		p := &fakeProber{w: w, script: func(size, _ int) (classify.Outcome, bool) {
			if size == 32 {
				return classify.Canceled, true
			}
			return "", false
		}}
		res, err := Run(context.Background(), Config{Min: 1, Max: 1000, Strategy: Bisect}, p)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want canceled", err)
		}
		if len(res.Trials) != 6 || res.Found {
			t.Errorf("partial result %+v", res)
		}
	})
	t.Run("prober error", func(t *testing.T) {
		boom := errors.New("cannot start trial")
		p := &fakeProber{w: w, err: func(call int) error {
			if call == 3 {
				return boom
			}
			return nil
		}}
		res, err := Run(context.Background(), Config{Min: 1, Max: 1000, Strategy: Bisect}, p)
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "probe batch sizes [8]") {
			t.Fatalf("error %v, want the prober's, wrapped", err)
		}
		if len(res.Trials) != 3 || res.Rounds != 4 {
			t.Errorf("partial result: %d trials, %d rounds", len(res.Trials), res.Rounds)
		}
	})
	t.Run("context canceled before a round", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		p := ProberFunc(func(_ context.Context, req Request) ([]Observation, error) {
			sizes := req.Sizes
			cancel()
			return []Observation{w.observe(sizes[0])}, nil
		})
		res, err := Run(ctx, Config{Min: 1, Max: 1000}, p)
		if !errors.Is(err, context.Canceled) || len(res.Trials) != 1 {
			t.Fatalf("error %v after %d trials, want canceled after 1", err, len(res.Trials))
		}
	})
}

// TestProberMisbehaves: a Prober that breaks its contract is an error, not
// a panic or a wrong answer.
func TestProberMisbehaves(t *testing.T) {
	tests := []struct {
		name string
		p    ProberFunc
		want string
	}{
		{"too few", func(context.Context, Request) ([]Observation, error) { return nil, nil }, "returned 0 observations"},
		{"wrong size", func(_ context.Context, req Request) ([]Observation, error) {
			return []Observation{{Size: req.Sizes[0] + 1, Outcome: classify.OK}}, nil
		}, "is for batch size"},
		{"unknown outcome", func(_ context.Context, req Request) ([]Observation, error) {
			return []Observation{{Size: req.Sizes[0], Outcome: "weird"}}, nil
		}, `unknown outcome "weird"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), Config{Min: 1, Max: 10}, tt.p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestConfirm(t *testing.T) {
	t.Run("answer holds", func(t *testing.T) {
		w := smallWorkload(211)
		p := &fakeProber{w: w}
		cfg := Config{Min: 1, Max: 1000, Capacity: w.capacity, Confirm: 2}
		res, err := Run(context.Background(), cfg, p)
		if err != nil {
			t.Fatal(err)
		}
		checkProof(t, res, cfg, 211)
		// The proof pair is re-checked (211, 212), then 211 confirmed twice.
		var reruns []int
		for _, o := range res.Trials {
			if o.Retry {
				reruns = append(reruns, o.Size)
			}
		}
		if !slices.Equal(reruns, []int{211, 212, 211, 211}) || !p.fresh[len(p.fresh)-1] || !p.fresh[len(p.fresh)-2] || p.fresh[0] {
			t.Errorf("re-runs %v, fresh %v; want the pair, then 2 fresh confirms", reruns, p.fresh)
		}
	})
	t.Run("parallel confirms in one round", func(t *testing.T) {
		w := smallWorkload(211)
		p := &fakeProber{w: w}
		cfg := Config{Min: 1, Max: 1000, Capacity: w.capacity, Confirm: 3, Parallel: 4}
		if _, err := Run(context.Background(), cfg, p); err != nil {
			t.Fatal(err)
		}
		if last := p.calls[len(p.calls)-1]; !slices.Equal(last, []int{211, 211, 211}) {
			t.Errorf("last call %v, want three confirms of 211", last)
		}
	})
	t.Run("a confirm fails", func(t *testing.T) {
		// 211 runs the first time and in the re-check of the proof pair,
		// but not in its first confirmation: not trusted, and flaky. The
		// search goes on below it and confirms the new answer too.
		w := smallWorkload(211)
		p := &fakeProber{w: w, script: func(size, attempt int) (classify.Outcome, bool) {
			if size == 211 && attempt == 2 {
				return classify.OOM, true
			}
			return "", false
		}}
		cfg := Config{Min: 1, Max: 1000, Capacity: w.capacity, Confirm: 2}
		res, err := Run(context.Background(), cfg, p)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Found || res.Max != 210 || res.FirstFailure != 211 {
			t.Fatalf("max %d first failure %d, want 210 and 211; trials %v", res.Max, res.FirstFailure, sizesOf(res.Trials))
		}
		if len(res.NonMonotonic) != 0 || !slices.Equal(res.Flaky, []FlakySize{{Size: 211, OK: 2, Failed: 1}}) || res.Exact() {
			t.Errorf("conflicts %+v, flaky %+v; want 211 flaky, no conflict", res.NonMonotonic, res.Flaky)
		}
		confirms := 0
		for _, o := range res.Trials {
			if o.Retry && o.Size == 210 && o.Outcome.Fits() {
				confirms++
			}
		}
		// One re-check of the new proof's 210, then two confirmations.
		if confirms != 3 {
			t.Errorf("210 re-run ok %d times, want 3", confirms)
		}
	})
}

func TestMargin(t *testing.T) {
	for _, strategy := range []Strategy{Model, Bisect} {
		for _, pct := range []float64{5, 10, 30} {
			for _, k := range []int{1, 3} {
				w := smallWorkload(211)
				w.noise, w.seed = w.perSample/4, 5
				cfg := Config{Min: 1, Max: 1000, Capacity: w.capacity, MarginPercent: pct, Strategy: strategy, Parallel: k}
				res, err := Run(context.Background(), cfg, &fakeProber{w: w})
				if err != nil {
					t.Fatal(err)
				}
				checkProof(t, res, cfg, 211)
				limit := float64(w.capacity) * (1 - pct/100)
				want := 0
				for s := 1; s <= 211 && float64(w.allocated(s)) <= limit; s++ {
					want = s
				}
				if res.Margin != want {
					t.Errorf("%s %g%% k=%d: margin %d, want %d", strategy, pct, k, res.Margin, want)
				}
				// The margin must be proven by measurement too.
				var sawIn, sawOut bool
				for _, o := range res.Trials {
					sawIn = sawIn || (o.Size == want && o.Outcome.Fits() && float64(o.Memory.Allocated) <= limit)
					sawOut = sawOut || (o.Size == want+1 && (!o.Outcome.Fits() || float64(o.Memory.Allocated) > limit))
				}
				if !sawIn || !sawOut {
					t.Errorf("%s %g%% k=%d: margin %d not proven by the trials %v", strategy, pct, k, want, sizesOf(res.Trials))
				}
				if res.Figure != FigureAllocated || res.Model == nil {
					t.Errorf("figure %q model %v", res.Figure, res.Model)
				}
			}
		}
	}
	t.Run("none leaves the margin free", func(t *testing.T) {
		w := smallWorkload(211)
		w.fixed = 21 * gib
		cfg := Config{Min: 1, Max: 1000, Capacity: w.capacity, MarginPercent: 20}
		res, err := Run(context.Background(), cfg, &fakeProber{w: w})
		if err != nil {
			t.Fatal(err)
		}
		if res.Margin != 0 {
			t.Errorf("margin %d, want 0", res.Margin)
		}
	})
	t.Run("no memory figures", func(t *testing.T) {
		w := smallWorkload(211)
		p := &fakeProber{w: w, only: func(Memory) Memory { return Memory{} }}
		cfg := Config{Min: 1, Max: 1000, Capacity: w.capacity, MarginPercent: 20}
		res, err := Run(context.Background(), cfg, p)
		if err != nil {
			t.Fatal(err)
		}
		checkProof(t, res, cfg, 211)
		if res.Margin != 0 || res.Model != nil || res.Figure != FigureNone {
			t.Errorf("margin %d model %v figure %q, want none", res.Margin, res.Model, res.Figure)
		}
	})
}

func TestValidate(t *testing.T) {
	ok := Config{Min: 1, Max: 100}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // "" for valid
	}{
		{"valid", func(*Config) {}, ""},
		{"valid with everything", func(c *Config) {
			*c = Config{Min: 8, Max: 512, MultipleOf: 8, Start: 64, Parallel: 2, Confirm: 1, Strategy: Bisect, Capacity: 1, MarginPercent: 10}
		}, ""},
		{"min above max", func(c *Config) { c.Min = 200 }, "min batch size 200 is above max 100"},
		{"min zero", func(c *Config) { c.Min = 0 }, "min batch size 0: must be at least 1"},
		{"max too large", func(c *Config) { c.Max = 1 << 40 }, "above the largest supported"},
		{"max negative", func(c *Config) { c.Max = -5 }, "max batch size -5"},
		{"multiple-of negative", func(c *Config) { c.MultipleOf = -8 }, "multiple-of -8"},
		{"no grid point", func(c *Config) { c.Min, c.Max, c.MultipleOf = 3, 7, 8 }, "no multiple of 8 lies in [3, 7]"},
		{"parallel negative", func(c *Config) { c.Parallel = -1 }, "parallel -1"},
		{"confirm negative", func(c *Config) { c.Confirm = -1 }, "confirm -1"},
		{"start outside", func(c *Config) { c.Start = 101 }, "start 101 is outside [1, 100]"},
		{"unknown strategy", func(c *Config) { c.Strategy = "golden" }, `unknown strategy "golden"`},
		{"margin too large", func(c *Config) { c.MarginPercent, c.Capacity = 95, 1 }, "margin 95%: must be between 0 and 90"},
		{"margin negative", func(c *Config) { c.MarginPercent, c.Capacity = -1, 1 }, "margin -1%"},
		{"margin without capacity", func(c *Config) { c.MarginPercent = 10 }, "margin needs the memory capacity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if _, err := Run(context.Background(), c, ProberFunc(nil)); err == nil {
				t.Error("Run accepted the invalid config")
			}
		})
	}
}

func TestEvents(t *testing.T) {
	w := smallWorkload(211)
	var events []Event
	p := &fakeProber{w: w}
	cfg := Config{Min: 1, Max: 1000, Capacity: w.capacity, Confirm: 1, MarginPercent: 10,
		OnEvent: func(e Event) { events = append(events, e) }}
	res, err := Run(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	var phases []Phase
	var plans [][]int
	var observed int
	predicted := false
	for _, e := range events {
		switch e.Kind {
		case EventPhase:
			phases = append(phases, e.Phase)
		case EventPlan:
			plans = append(plans, e.Sizes)
			predicted = predicted || e.Predicted > 0
		case EventObservation:
			observed++
		case EventBracket:
			if e.Lo != 0 && e.Hi != 0 && e.Lo >= e.Hi {
				t.Errorf("bracket [%d, %d]", e.Lo, e.Hi)
			}
		}
	}
	// A prediction that hits at once proves the answer while still
	// bracketing, so refine may be skipped; the order may not change.
	if want, skipRefine := []Phase{PhaseBracket, PhaseRefine, PhaseRecheck, PhaseConfirm, PhaseMargin}, []Phase{PhaseBracket, PhaseRecheck, PhaseConfirm, PhaseMargin}; !slices.Equal(phases, want) && !slices.Equal(phases, skipRefine) {
		t.Errorf("phases %v, want %v", phases, want)
	}
	if !slices.EqualFunc(plans, p.calls, slices.Equal) || observed != len(res.Trials) {
		t.Errorf("plans %v for calls %v; %d observation events for %d trials", plans, p.calls, observed, len(res.Trials))
	}
	if !predicted {
		t.Error("no plan carried the model's prediction")
	}
	last := events[len(events)-1]
	if last.Lo != 211 || last.Hi != 212 {
		t.Errorf("last event's bracket [%d, %d], want [211, 212]", last.Lo, last.Hi)
	}
}

// TestNotMonotoneHighestBoundary: workloads that fail at a few sizes (a
// hole) below their true limit, every time, as programs near their limit
// do where fragmentation or a per-shape algorithm decides. Whatever its
// path, a search answers a proven boundary at or above every size it saw
// run (checkHighestBoundary).
func TestNotMonotoneHighestBoundary(t *testing.T) {
	w := smallWorkload(211)
	var cfgs []Config
	for _, c := range []Config{
		{Parallel: 1}, {Parallel: 2}, {Parallel: 3}, {Parallel: 1, Strategy: Bisect}, {Parallel: 3, Strategy: Bisect},
		{Parallel: 1, SideBySide: 3, ProofAlongside: true}, {Parallel: 2, SideBySide: 6, ProofAlongside: true},
	} {
		c.Min, c.Max, c.Capacity = 1, 1000, w.capacity
		cfgs = append(cfgs, c)
	}
	searchHoles(t, cfgs, 9, 210, 7, 211, func(hole func(int) bool) Prober {
		return &fakeProber{w: w, script: func(size, _ int) (classify.Outcome, bool) {
			if hole(size) {
				return classify.OOM, true
			}
			return "", false
		}}
	})
}

// searchHoles searches, with each of cfgs, a workload that fits up to truth
// but in a hole of one or three sizes that fail every time, starting at
// every step-th size from first to last, each through the prober that
// prober makes for it, and checks every result (checkHighestBoundary); at
// least one search must meet a hole and answer above it.
func searchHoles(t *testing.T, cfgs []Config, first, last, step, truth int, prober func(hole func(int) bool) Prober) {
	t.Helper()
	reached := 0
	for _, cfg := range cfgs {
		for from := first; from <= last; from += step {
			for _, width := range []int{1, 3} {
				hole := func(s int) bool { return s >= from && s < from+width }
				res, err := Run(context.Background(), cfg, prober(hole))
				name := fmt.Sprintf("k=%d %s side by side %d, hole %d-%d", cfg.Parallel, cfg.Strategy, cfg.SideBySide, from, from+width-1)
				if err != nil {
					t.Fatalf("%s: %v (trials %v)", name, err, sizesOf(res.Trials))
				}
				if checkHighestBoundary(t, name, res, cfg, hole, truth) {
					reached++
				}
			}
		}
	}
	if reached == 0 {
		t.Error("no search tried a hole and went on above it: the test tests nothing")
	}
	t.Logf("%d searches tried a hole and answered above it", reached)
}

// checkHighestBoundary checks a search of a workload that fits up to truth
// except in a hole: its answer is proven (checkProof) and at or above every
// size seen to run, so it is the hole's foot only if nothing above the hole
// ran, else truth, with the conflict reported where the hole was tried. It
// says whether the search tried the hole and answered above it.
func checkHighestBoundary(t *testing.T, name string, res Result, cfg Config, hole func(int) bool, truth int) bool {
	t.Helper()
	tried := false
	for _, o := range res.Trials {
		if o.Outcome.Fits() && o.Size > res.Max {
			t.Errorf("%s: answer %d below %d, which ran (trials %v)", name, res.Max, o.Size, sizesOf(res.Trials))
		}
		tried = tried || hole(o.Size)
	}
	if hole(res.Max + 1) {
		checkProof(t, res, cfg, res.Max)
		return false
	}
	checkProof(t, res, cfg, truth)
	if tried && len(res.NonMonotonic) == 0 {
		t.Errorf("%s: the hole was tried, no conflict reported (trials %v)", name, sizesOf(res.Trials))
	}
	return tried
}
