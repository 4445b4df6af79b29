package search

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

// at injects outcome at size, every time it runs.
func at(size int, outcome classify.Outcome) func(int, int) (classify.Outcome, bool) {
	return func(s, _ int) (classify.Outcome, bool) { return outcome, s == size }
}

// nothingFitsAt matches the error of a search whose smallest size, size,
// did not fit.
func nothingFitsAt(size int) func(error) bool {
	return func(err error) bool {
		var nf *NothingFitsError
		return errors.Is(err, ErrNothingFits) && errors.As(err, &nf) && nf.Observation.Size == size
	}
}

func crashedAt(size int) func(error) bool {
	return func(err error) bool {
		var c *CrashError
		return errors.As(err, &c) && c.Observation.Size == size
	}
}

func canceled(err error) bool { return errors.Is(err, context.Canceled) }

// TestSettle: settling searches in fresh trials from the warm answer, and
// proves its answer as Run does: the answer seen to fit twice, and its
// first failure seen to fail four times (no memory model vouches for it
// here) or twice (the model rules it out).
func TestSettle(t *testing.T) {
	grid64 := Config{Min: 1, Max: 64}
	// Multiples of 8 in [8, 1000].
	odd8 := Config{Min: 5, Max: 1001, MultipleOf: 8}
	tests := []struct {
		name          string
		cfg           Config
		fits          int // fresh trials fit sizes up to this
		script        func(size, attempt int) (classify.Outcome, bool)
		answer, first int // the warm search's
		calls         [][]int
		// want and wantFirst are the settled answer; agreed whether it is
		// the warm one, unchanged and exact.
		want, wantFirst int
		agreed          bool
		flaky           []FlakySize
		nonMonotonic    int              // conflicts that held
		err             func(error) bool // nil: no error
	}{
		{name: "agree", cfg: grid64, fits: 20, answer: 20, first: 21,
			calls: [][]int{{20, 21}, {20}, {21}, {21}, {21}}, want: 20, wantFirst: 21, agreed: true},
		{name: "agree at the top", cfg: grid64, fits: 100, answer: 64,
			calls: [][]int{{64}, {64}}, want: 64, agreed: true},
		{name: "agree, three at a time", cfg: Config{Min: 1, Max: 64, Parallel: 3}, fits: 20, answer: 20, first: 21,
			calls: [][]int{{20, 21}, {20, 21, 21}, {21}}, want: 20, wantFirst: 21, agreed: true},
		{name: "agree, three side by side", cfg: Config{Min: 1, Max: 64, SideBySide: 3}, fits: 20, answer: 20, first: 21,
			calls: [][]int{{20, 21, 21}, {20, 21, 21}}, want: 20, wantFirst: 21, agreed: true},

		{name: "down one", cfg: grid64, fits: 19, answer: 20, first: 21,
			calls: [][]int{{20, 21}, {19}, {19}, {20}, {20}, {20}}, want: 19, wantFirst: 20},
		{name: "down two", cfg: grid64, fits: 18, answer: 20, first: 21,
			calls: [][]int{{20, 21}, {19}, {18}, {18}, {19}, {19}, {19}}, want: 18, wantFirst: 19},
		{name: "down, gallop then bisect", cfg: grid64, fits: 11, answer: 20, first: 21,
			calls: [][]int{{20, 21}, {19}, {18}, {16}, {12}, {4}, {8}, {10}, {11}, {11}, {12}, {12}, {12}}, want: 11, wantFirst: 12},
		{name: "down, the model rules out the first failure", cfg: Config{Min: 1, Max: 64, Capacity: 24 * gib}, fits: 11, answer: 20, first: 21,
			calls: [][]int{{20, 21}, {19}, {18}, {16}, {12}, {4}, {8}, {10}, {11}, {11}, {12}}, want: 11, wantFirst: 12},
		{name: "down to the min, which fits", cfg: Config{Min: 15, Max: 64}, fits: 15, answer: 20, first: 21,
			calls: [][]int{{20, 21}, {19}, {18}, {16}, {15}, {15}, {16}, {16}, {16}}, want: 15, wantFirst: 16},
		{name: "down to the min: nothing fits", cfg: Config{Min: 15, Max: 64}, fits: 10, answer: 20, first: 21,
			calls: [][]int{{20, 21}, {19}, {18}, {16}, {15}}, err: nothingFitsAt(15)},
		{name: "answer at the min does not fit", cfg: Config{Min: 20, Max: 64}, fits: 10, answer: 20, first: 21,
			calls: [][]int{{20, 21}}, err: nothingFitsAt(20)},
		{name: "the answer fails, its first failure fits: a contradiction that holds, and the boundary above it", cfg: grid64, fits: 18, answer: 20, first: 21,
			script: at(21, classify.OK),
			calls:  [][]int{{20, 21}, {20}, {21}, {22}, {22}, {22}, {22}}, want: 21, wantFirst: 22, nonMonotonic: 1},
		{name: "down from the top", cfg: grid64, fits: 61, answer: 64,
			calls: [][]int{{64}, {63}, {62}, {60}, {61}, {61}, {62}, {62}, {62}}, want: 61, wantFirst: 62},

		{name: "up, gallop then bisect", cfg: grid64, fits: 25, answer: 20, first: 21,
			calls: [][]int{{20, 21}, {22}, {23}, {25}, {29}, {27}, {26}, {25}, {26}, {26}, {26}}, want: 25, wantFirst: 26},
		{name: "up, bisecting below a prior failure instead of galloping past it", fits: 25, answer: 20, first: 21,
			cfg:   Config{Min: 1, Max: 64, Prior: []Observation{{Size: 27, Outcome: classify.OOM}}},
			calls: [][]int{{20, 21}, {24}, {25}, {26}, {25}, {26}, {26}, {26}}, want: 25, wantFirst: 26},
		{name: "down, a prior failure counting for the proof", fits: 19, answer: 20, first: 21,
			cfg:   Config{Min: 1, Max: 64, Prior: []Observation{{Size: 20, Outcome: classify.OOM}, {Size: 20, Outcome: classify.OOM}}},
			calls: [][]int{{20, 21}, {19}, {19}, {20}}, want: 19, wantFirst: 20},
		{name: "a prior failure that fits here gives way, and is not flaky", fits: 23, answer: 20, first: 21,
			cfg:   Config{Min: 1, Max: 64, Prior: []Observation{{Size: 22, Outcome: classify.OOM}}},
			calls: [][]int{{20, 21}, {21}, {22}, {23}, {25}, {24}, {23}, {24}, {24}, {24}}, want: 23, wantFirst: 24},
		{name: "up to the top", cfg: grid64, fits: 100, answer: 60, first: 61,
			calls: [][]int{{60, 61}, {62}, {63}, {64}, {64}}, want: 64},
		{name: "up, the top fails", cfg: grid64, fits: 63, answer: 60, first: 61,
			calls: [][]int{{60, 61}, {62}, {63}, {64}, {63}, {64}, {64}, {64}}, want: 63, wantFirst: 64},
		{name: "the first failure is the top and fits", cfg: grid64, fits: 100, answer: 63, first: 64,
			calls: [][]int{{63, 64}, {64}}, want: 64},

		{name: "the answer is flaky", cfg: grid64, fits: 20, answer: 20, first: 21,
			script: nth(20, 1, classify.OOM),
			calls:  [][]int{{20, 21}, {20}, {19}, {19}}, want: 19, wantFirst: 20, flaky: []FlakySize{{20, 1, 1}}},
		{name: "the first failure is flaky", cfg: grid64, fits: 20, answer: 20, first: 21,
			script: nth(21, 2, classify.OK),
			calls:  [][]int{{20, 21}, {20}, {21}, {21}}, want: 20, wantFirst: 21, flaky: []FlakySize{{21, 1, 2}}},
		{name: "a spurious failure on the way up: the safe side", cfg: grid64, fits: 25, answer: 20, first: 21,
			script: nth(23, 0, classify.OOM),
			calls:  [][]int{{20, 21}, {22}, {23}, {22}, {23}}, want: 22, wantFirst: 23, flaky: []FlakySize{{23, 1, 1}}},

		{name: "multiple of 8: agree", cfg: odd8, fits: 100, answer: 96, first: 104,
			calls: [][]int{{96, 104}, {96}, {104}, {104}, {104}}, want: 96, wantFirst: 104, agreed: true},
		{name: "multiple of 8: down", cfg: odd8, fits: 90, answer: 96, first: 104,
			calls: [][]int{{96, 104}, {88}, {88}, {96}, {96}, {96}}, want: 88, wantFirst: 96},
		{name: "multiple of 8: up", cfg: odd8, fits: 130, answer: 96, first: 104,
			calls: [][]int{{96, 104}, {112}, {120}, {136}, {128}, {128}, {136}, {136}, {136}}, want: 128, wantFirst: 136},
		{name: "multiple of 8: down to an odd min", cfg: Config{Min: 13, Max: 1001, MultipleOf: 8}, fits: 20, answer: 64, first: 72,
			calls: [][]int{{64, 72}, {56}, {48}, {32}, {16}, {24}, {16}, {24}, {24}, {24}}, want: 16, wantFirst: 24},
		{name: "multiple of 8: nothing fits", cfg: odd8, fits: 3, answer: 40, first: 48,
			calls: [][]int{{40, 48}, {32}, {24}, {8}}, err: nothingFitsAt(8)},
		{name: "multiple of 8: up to an odd max", cfg: odd8, fits: 5000, answer: 968, first: 976,
			calls: [][]int{{968, 976}, {984}, {992}, {1000}, {1000}}, want: 1000},

		{name: "crash in the first round", cfg: grid64, fits: 20, answer: 20, first: 21,
			script: at(21, classify.Crash),
			calls:  [][]int{{20, 21}}, err: crashedAt(21)},
		{name: "crash mid-settle", cfg: grid64, fits: 11, answer: 20, first: 21,
			script: at(16, classify.Crash),
			calls:  [][]int{{20, 21}, {19}, {18}, {16}}, err: crashedAt(16)},
		{name: "canceled trial", cfg: grid64, fits: 25, answer: 20, first: 21,
			script: at(23, classify.Canceled),
			calls:  [][]int{{20, 21}, {22}, {23}}, err: canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakeProber{w: smallWorkload(tt.fits), script: tt.script}
			st, err := Settle(context.Background(), tt.cfg, p, tt.answer, tt.first)
			if !slices.EqualFunc(p.calls, tt.calls, slices.Equal) {
				t.Errorf("calls %v, want %v", p.calls, tt.calls)
			}
			if i := slices.Index(p.fresh, false); i >= 0 {
				t.Errorf("call %d (%v) was not marked fresh", i+1, p.calls[i])
			}
			if got, want := sizesOf(st.Trials), slices.Concat(tt.calls...); !slices.Equal(got, want) {
				t.Errorf("trials %v, want every probed size: %v", got, want)
			}
			for _, o := range st.Trials {
				if !o.Retry {
					t.Errorf("trial %+v not marked a re-run", o)
				}
			}
			if tt.err != nil {
				if !tt.err(err) || st.Max != 0 || st.FirstFailure != 0 {
					t.Fatalf("settled %d (first failure %d), error %v", st.Max, st.FirstFailure, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Max != tt.want || st.FirstFailure != tt.wantFirst || st.Agreed != tt.agreed {
				t.Errorf("settled %d (first failure %d, agreed %v), want %d (%d, %v)",
					st.Max, st.FirstFailure, st.Agreed, tt.want, tt.wantFirst, tt.agreed)
			}
			if !slices.Equal(st.Flaky, tt.flaky) || len(st.NonMonotonic) != tt.nonMonotonic {
				t.Errorf("flaky %+v, %d conflicts; want %+v, %d", st.Flaky, len(st.NonMonotonic), tt.flaky, tt.nonMonotonic)
			}
			if len(st.Flaky) > 0 {
				checkSafeSide(t, Result{Max: st.Max, Found: true, Flaky: st.Flaky, Trials: st.Trials})
			}
		})
	}
}

// nth injects outcome at size on its nth trial there (from 0) only.
func nth(size, n int, outcome classify.Outcome) func(int, int) (classify.Outcome, bool) {
	return func(s, attempt int) (classify.Outcome, bool) { return outcome, s == size && attempt == n }
}

// Settle goes no further than a canceled context, and says why it
// stopped.
func TestSettleContextCanceled(t *testing.T) {
	w := smallWorkload(10)
	ctx, cancel := context.WithCancel(context.Background())
	var calls [][]int
	p := ProberFunc(func(_ context.Context, req Request) ([]Observation, error) {
		sizes := req.Sizes
		calls = append(calls, sizes)
		cancel()
		obs := make([]Observation, len(sizes))
		for i, s := range sizes {
			obs[i] = w.observe(s)
		}
		return obs, nil
	})
	st, err := Settle(ctx, Config{Min: 1, Max: 64}, p, 20, 21)
	if !errors.Is(err, context.Canceled) || len(calls) != 1 || len(st.Trials) != 2 {
		t.Fatalf("error %v after calls %v (%d trials), want canceled after the first", err, calls, len(st.Trials))
	}
}

// A Prober that breaks its contract is an error, as in Run; so are an
// answer and a first failure that Run cannot have returned.
func TestSettleRejects(t *testing.T) {
	ok := ProberFunc(func(_ context.Context, req Request) ([]Observation, error) {
		sizes := req.Sizes
		obs := make([]Observation, len(sizes))
		for i, s := range sizes {
			obs[i] = Observation{Size: s, Outcome: classify.OK}
		}
		return obs, nil
	})
	boom := errors.New("cannot start trial")
	tests := []struct {
		name          string
		cfg           Config
		p             ProberFunc
		answer, first int
		want          string
	}{
		{"too few", Config{Min: 1, Max: 64}, func(context.Context, Request) ([]Observation, error) {
			return []Observation{{Size: 20, Outcome: classify.OK}}, nil
		}, 20, 21, "returned 1 observations"},
		{"wrong size", Config{Min: 1, Max: 64}, func(_ context.Context, req Request) ([]Observation, error) {
			return []Observation{{Size: req.Sizes[0] + 1, Outcome: classify.OK}}, nil
		}, 64, 0, "is for batch size 65"},
		{"unknown outcome", Config{Min: 1, Max: 64}, func(_ context.Context, req Request) ([]Observation, error) {
			return []Observation{{Size: req.Sizes[0], Outcome: "weird"}}, nil
		}, 64, 0, `unknown outcome "weird"`},
		{"prober error", Config{Min: 1, Max: 64}, func(context.Context, Request) ([]Observation, error) {
			return nil, boom
		}, 20, 21, "probe batch sizes [20 21]: cannot start trial"},
		{"invalid config", Config{Min: 10, Max: 5}, ok, 5, 0, "invalid search"},
		{"answer off the grid", Config{Min: 5, Max: 1001, MultipleOf: 8}, ok, 20, 28, "answer 20 is not a multiple of 8 in [8, 1000]"},
		{"answer out of range", Config{Min: 1, Max: 64}, ok, 65, 0, "answer 65 is not a multiple of 1 in [1, 64]"},
		{"no first failure below the top", Config{Min: 1, Max: 64}, ok, 20, 0, "answer 20 has no first failure, but the top is 64"},
		{"first failure not next", Config{Min: 5, Max: 1001, MultipleOf: 8}, ok, 96, 112, "first failure 112 is not the size after answer 96"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Settle(context.Background(), tt.cfg, tt.p, tt.answer, tt.first)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if tt.name == "prober error" && !errors.Is(err, boom) {
				t.Errorf("error %v does not wrap the prober's", err)
			}
		})
	}
}

// Settling reports its rounds as Run does, all in the confirm phase, with
// the bracket as fresh trials move it.
func TestSettleEvents(t *testing.T) {
	var events []Event
	p := &fakeProber{w: smallWorkload(18)}
	cfg := Config{Min: 1, Max: 64, OnEvent: func(e Event) { events = append(events, e) }}
	st, err := Settle(context.Background(), cfg, p, 20, 21)
	if err != nil {
		t.Fatal(err)
	}
	var phases []Phase
	var plans [][]int
	var brackets [][2]int
	var observed []int
	for _, e := range events {
		switch e.Kind {
		case EventPhase:
			phases = append(phases, e.Phase)
		case EventPlan:
			plans = append(plans, e.Sizes)
		case EventObservation:
			observed = append(observed, e.Observation.Size)
		case EventBracket:
			brackets = append(brackets, [2]int{e.Lo, e.Hi})
		}
		if e.Kind != EventBracket && e.Phase != PhaseConfirm {
			t.Errorf("%s event in phase %q", e.Kind, e.Phase)
		}
	}
	if !slices.Equal(phases, []Phase{PhaseConfirm}) {
		t.Errorf("phases %v", phases)
	}
	if !slices.EqualFunc(plans, p.calls, slices.Equal) || !slices.Equal(observed, sizesOf(st.Trials)) {
		t.Errorf("plans %v for calls %v; observations %v for trials %v", plans, p.calls, observed, sizesOf(st.Trials))
	}
	if want := [][2]int{{0, 20}, {0, 19}, {18, 19}}; !slices.Equal(brackets, want) {
		t.Errorf("brackets %v, want %v", brackets, want)
	}
}
