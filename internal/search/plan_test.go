package search

import (
	"testing"

	"github.com/batchfit/batchfit/internal/memmodel"
)

// TestCreepingModelBisects: a model that predicts the boundary just past
// the last trial every time (here one size above lo, or below hi) is let
// creep for refineSlack rounds, then moved towards the middle: the bracket
// closes within refineSlack rounds of bisection's, and a model that is
// right is never moved.
func TestCreepingModelBisects(t *testing.T) {
	g := grid{min: 1, max: 1 << 16, step: 1}
	for _, tc := range []struct {
		name    string
		answer  int
		predict func(v view) int
	}{
		{"creeping up", 700, func(v view) int { return v.lo + 1 }},
		{"creeping down", 300, func(v view) int { return v.hi - 1 }},
		{"right", 700, func(v view) int {
			if v.lo == 700 {
				return 701
			}
			return 700
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := view{g: g, k: 1, lo: 1, hi: 1025}
			var b refineBudget
			limit := bisectRounds(v.hi-v.lo, v) + refineSlack
			rounds, moved := 0, 0
			for v.hi > v.lo+1 {
				want := tc.predict(v)
				sizes := b.hold(v, []int{want})
				if len(sizes) != 1 || sizes[0] <= v.lo || sizes[0] >= v.hi {
					t.Fatalf("bracket (%d, %d): planned %v", v.lo, v.hi, sizes)
				}
				if sizes[0] != want {
					moved++
				}
				if rounds++; rounds < refineSlack && sizes[0] != want {
					t.Errorf("round %d moved the model's %d to %d before the slack was spent", rounds, want, sizes[0])
				}
				if sizes[0] <= tc.answer {
					v.lo = sizes[0]
				} else {
					v.hi = sizes[0]
				}
			}
			if v.lo != tc.answer || rounds > limit {
				t.Errorf("closed on %d in %d rounds, want %d in at most %d", v.lo, rounds, tc.answer, limit)
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
		v.points = []memmodel.Point{{Size: v.lo, Bytes: uint64(v.lo) * mib}}
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
// closes the bracket. A step below lo, or a failure whose figures the model
// does not explain, gives no step.
func TestShortfallStep(t *testing.T) {
	// 300 MiB + 12 MiB a sample allocated, 150 MiB more reserved, under a
	// 24 GiB cap: sizes up to 2010 fit (24270 + 150 ≤ 24576).
	peak := func(s int) uint64 { return (300 + 12*uint64(s)) * mib }
	fit, err := memmodel.Estimate([]memmodel.Point{{Size: 8, Bytes: peak(8)}, {Size: 521, Bytes: peak(521)}})
	if err != nil {
		t.Fatal(err)
	}
	g := grid{min: 1, max: 1 << 16, step: 1}
	// failAt fails at size s at its last block: held its peak less the
	// request, with what the cap left after the reserve.
	failAt := func(s int) Failure {
		request := uint64(96 * mib)
		held := peak(s) - request
		reserved := held + 150*mib
		return Failure{Request: request, Allocated: held, Reserved: reserved, Free: 24*gib - reserved, Capped: true, Exact: true}
	}
	base := view{g: g, k: 1, fig: FigureAllocated, fit: &fit, growth: fit.Slope}
	for _, tc := range []struct {
		name   string
		lo, hi int
		failed Failure
		want   int // 0: no step
	}{
		{"from a failure 8 sizes above", 521, 2018, failAt(2018), 2010},
		{"the step ran: its neighbour", 2010, 2018, failAt(2018), 2011},
		{"a step below lo", 2012, 2018, failAt(2018), 0},
		{"the failure held more than the model's peak", 521, 2018, func() Failure {
			f := failAt(2018)
			f.Allocated += 4 * gib
			return f
		}(), 0},
		{"nothing known of the failure", 521, 2018, Failure{}, 0},
	} {
		v := base
		v.lo, v.hi, v.failed = tc.lo, tc.hi, tc.failed
		s, ok := shortfallStep(v)
		if got := map[bool]int{true: s}[ok]; got != tc.want {
			t.Errorf("%s: step %d (%v), want %d", tc.name, s, ok, tc.want)
		}
	}
}
