package search

import (
	"slices"
	"testing"
)

// TestCreepingModelBisects: a model that predicts the boundary just past
// the last trial every time (one size above lo, or below hi) is let creep
// for refineSlack rounds, then moved: further each time until it bisects,
// so the bracket closes in a small multiple of bisection's rounds, not in
// hundreds. A model that is right is never moved.
func TestCreepingModelBisects(t *testing.T) {
	g := grid{min: 1, max: 1 << 16, step: 1}
	for _, tc := range []struct {
		name    string
		answer  int
		predict func(v view) int
		limit   int
	}{
		// Bisection takes 10 rounds.
		{"creeping up", 700, func(v view) int { return v.lo + 1 }, 30},
		{"creeping down", 300, func(v view) int { return v.hi - 1 }, 30},
		{"right", 700, func(v view) int {
			if v.lo == 700 {
				return 701
			}
			return 700
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := view{g: g, k: 1, lo: 1, hi: 1025}
			var r refineGuard
			rounds, moved := 0, 0
			for v.hi > v.lo+1 {
				want := tc.predict(v)
				sizes := r.hold(v, []int{want})
				if len(sizes) != 1 || sizes[0] <= v.lo || sizes[0] >= v.hi {
					t.Fatalf("bracket (%d, %d): planned %v", v.lo, v.hi, sizes)
				}
				if sizes[0] != want {
					moved++
				}
				if rounds++; rounds <= refineSlack && sizes[0] != want {
					t.Errorf("round %d moved the model's %d to %d before the slack was spent", rounds, want, sizes[0])
				}
				if sizes[0] <= tc.answer {
					v.lo = sizes[0]
				} else {
					v.hi = sizes[0]
				}
			}
			if v.lo != tc.answer || rounds > tc.limit {
				t.Errorf("closed on %d in %d rounds, want %d in at most %d", v.lo, rounds, tc.answer, tc.limit)
			}
			if tc.name == "right" && moved > 0 {
				t.Errorf("a right model was moved %d times", moved)
			}
			t.Logf("%d rounds, %d moved", rounds, moved)
		})
	}
}

// TestModelGallops: while nothing has failed, a model whose every fit puts
// the boundary one size above the largest that ran, while that size's peak
// stays far below the capacity, is made to gallop: the growth takes a
// number of rounds logarithmic in the answer, not linear.
func TestModelGallops(t *testing.T) {
	g := grid{min: 1, max: 1 << 16, step: 1}
	const answer = 5000
	var gl gallop
	v := view{g: g, k: 1, lo: 8, hi: g.max + 1, cLo: 24 * gib}
	rounds := 0
	for v.growing() {
		// The figure grows a tenth as fast as the fit says: lo's peak
		// stays far below the capacity.
		v.points = []point{{Size: v.lo, Bytes: uint64(v.lo) * mib}}
		sizes := gl.hold(v, []int{v.lo + 1})
		if len(sizes) != 1 || sizes[0] <= v.lo {
			t.Fatalf("lo %d: planned %v", v.lo, sizes)
		}
		rounds++
		if sizes[0] > answer {
			v.hi = sizes[0]
		} else {
			v.lo = sizes[0]
		}
		if rounds > 100 {
			t.Fatalf("still growing after %d rounds, at %d", rounds, v.lo)
		}
	}
	// Two rounds of one size each, then steps of 2, 4, 8 ... past 5000:
	// 15 rounds, where creeping would take 5000.
	if rounds > 15 {
		t.Errorf("%d rounds to pass %d, want ≤ 15", rounds, answer)
	}
	t.Logf("%d rounds, bracket (%d, %d)", rounds, v.lo, v.hi)
}

// TestShortfallStep: a capped failure's shortfall over the growth of
// reserved memory a sample places the boundary: the step lands on the
// largest size that fits, and once that ran, on its neighbour above, which
// closes the bracket. A failure well before its peak places it by what it
// could have reached. A step below lo, or a failure whose figures the model
// does not explain, gives no step.
func TestShortfallStep(t *testing.T) {
	// 300 MiB + 12 MiB a sample allocated, 150 MiB more reserved, under a
	// 24 GiB cap: sizes up to 2010 fit (24420 + 150 ≤ 24576).
	peak := func(s int) uint64 { return (300 + 12*uint64(s)) * mib }
	fit, err := estimate([]point{{Size: 8, Bytes: peak(8)}, {Size: 521, Bytes: peak(521)}})
	if err != nil {
		t.Fatal(err)
	}
	g := grid{min: 1, max: 1 << 16, step: 1}
	// failAt is a trial at s that allocates its last memory in blocks of
	// 96 MiB: the first that takes reserved memory past the cap fails.
	failAt := func(s int) Failure {
		const request, cap = 96 * mib, 24 * gib
		excess := int64(peak(s)+150*mib) - cap
		blocks := uint64(excess/request + 1)
		held := peak(s) - blocks*request
		reserved := held + 150*mib
		return Failure{Request: request, Allocated: held, Reserved: reserved, Free: cap - reserved, Capped: true, Exact: true}
	}
	base := view{g: g, fig: FigureAllocated, fit: &fit, growth: fit.Slope}
	held := failAt(2018)
	held.Allocated += 4 * gib
	for _, tc := range []struct {
		name   string
		k      int
		lo, hi int
		failed Failure
		want   []int // nil: no step
	}{
		{"from a failure 8 sizes above", 1, 521, 2018, failAt(2018), []int{2010}},
		{"the step ran: its neighbour", 1, 2010, 2018, failAt(2018), []int{2011}},
		{"two sizes a round: the step and its neighbour", 2, 521, 2018, failAt(2018), []int{2010, 2011}},
		{"four sizes a round: no more", 4, 521, 2018, failAt(2018), []int{2010, 2011}},
		// 2040 fails four blocks before its peak: 66 MiB short, which
		// says 2034; what it could reach says 2010.
		{"a failure well before its peak", 1, 521, 2040, failAt(2040), []int{2010}},
		{"a step below lo", 1, 2012, 2018, failAt(2018), nil},
		{"the failure held more than the model's peak", 1, 521, 2018, held, nil},
		{"nothing known of the failure", 1, 521, 2018, Failure{}, nil},
	} {
		v := base
		v.k, v.lo, v.hi, v.failed = tc.k, tc.lo, tc.hi, tc.failed
		sizes, ok := shortfallStep(v)
		if got := map[bool][]int{true: sizes}[ok]; !slices.Equal(got, tc.want) {
			t.Errorf("%s: step %v (%v), want %v", tc.name, sizes, ok, tc.want)
		}
	}
}
