package plan

import (
	"slices"
	"testing"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

// TestCreepingModelBisects: a model that predicts the boundary just past
// the last trial every time (one size above lo, or below hi) is let creep
// for refineSlack rounds, then moved: further each time until it bisects,
// so the bracket closes in a small multiple of bisection's rounds, not in
// hundreds. A model that is right is never moved.
func TestCreepingModelBisects(t *testing.T) {
	g := Grid{Min: 1, Max: 1 << 16, Step: 1}
	for _, tc := range []struct {
		name    string
		answer  int
		predict func(v View) int
		limit   int
	}{
		// Bisection takes 10 rounds.
		{"creeping up", 700, func(v View) int { return v.Lo + 1 }, 30},
		{"creeping down", 300, func(v View) int { return v.Hi - 1 }, 30},
		{"right", 700, func(v View) int {
			if v.Lo == 700 {
				return 701
			}
			return 700
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := View{Grid: g, K: 1, Lo: 1, Hi: 1025}
			var r refineGuard
			rounds, moved := 0, 0
			for v.Hi > v.Lo+1 {
				want := tc.predict(v)
				sizes := r.hold(v, []int{want})
				if len(sizes) != 1 || sizes[0] <= v.Lo || sizes[0] >= v.Hi {
					t.Fatalf("bracket (%d, %d): planned %v", v.Lo, v.Hi, sizes)
				}
				if sizes[0] != want {
					moved++
				}
				if rounds++; rounds <= refineSlack && sizes[0] != want {
					t.Errorf("round %d moved the model's %d to %d before the slack was spent", rounds, want, sizes[0])
				}
				if sizes[0] <= tc.answer {
					v.Lo = sizes[0]
				} else {
					v.Hi = sizes[0]
				}
			}
			if v.Lo != tc.answer || rounds > tc.limit {
				t.Errorf("closed on %d in %d rounds, want %d in at most %d", v.Lo, rounds, tc.answer, tc.limit)
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
	g := Grid{Min: 1, Max: 1 << 16, Step: 1}
	const answer = 5000
	var gl gallop
	v := View{Grid: g, K: 1, Lo: 8, Hi: g.Max + 1, PeakLo: 24 * gib}
	rounds := 0
	for v.Growing() {
		// The figure grows a tenth as fast as the fit says: lo's peak
		// stays far below the capacity.
		v.Points = []Point{{Size: v.Lo, Bytes: uint64(v.Lo) * mib}}
		sizes := gl.hold(v, []int{v.Lo + 1})
		if len(sizes) != 1 || sizes[0] <= v.Lo {
			t.Fatalf("lo %d: planned %v", v.Lo, sizes)
		}
		rounds++
		if sizes[0] > answer {
			v.Hi = sizes[0]
		} else {
			v.Lo = sizes[0]
		}
		if rounds > 100 {
			t.Fatalf("still growing after %d rounds, at %d", rounds, v.Lo)
		}
	}
	// Two rounds of one size each, then steps of 2, 4, 8 ... past 5000:
	// 15 rounds, where creeping would take 5000.
	if rounds > 15 {
		t.Errorf("%d rounds to pass %d, want ≤ 15", rounds, answer)
	}
	t.Logf("%d rounds, bracket (%d, %d)", rounds, v.Lo, v.Hi)
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
	fit, err := Estimate([]Point{{Size: 8, Bytes: peak(8)}, {Size: 521, Bytes: peak(521)}})
	if err != nil {
		t.Fatal(err)
	}
	g := Grid{Min: 1, Max: 1 << 16, Step: 1}
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
	base := View{Grid: g, Allocated: true, Fit: &fit, Growth: fit.Slope}
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
		v.K, v.Lo, v.Hi, v.Failed = tc.k, tc.lo, tc.hi, tc.failed
		sizes, ok := shortfallStep(v)
		if got := map[bool][]int{true: sizes}[ok]; !slices.Equal(got, tc.want) {
			t.Errorf("%s: step %v (%v), want %v", tc.name, sizes, ok, tc.want)
		}
	}
}

// A failure that missed by less than one sample's memory sends the next
// probe just below it: SimCLR at 283 asked for 56 MiB with 5 MiB left under
// its cap, about 80 MiB a sample, so 282 is tried next, not the middle of
// the window.
func TestNearMissProbesJustBelow(t *testing.T) {
	const mib = 1 << 20
	fit, err := Estimate([]Point{{Size: 8, Bytes: 1300 * mib}, {Size: 156, Bytes: 13200 * mib}})
	if err != nil {
		t.Fatal(err)
	}
	g := Grid{Min: 1, Max: 65536, Step: 1}
	base := View{Grid: g, K: 1, Lo: 156, Hi: 283, Allocated: true, Fit: &fit, Growth: fit.Slope, PeakLo: 23.5 * 1024 * mib, PeakHi: 23.9 * 1024 * mib}
	for _, tc := range []struct {
		name   string
		failed Failure
		k      int
		near   bool
	}{
		{"56 MiB asked, 5 MiB left under a cap", Failure{Request: 56 * mib, Free: 5 * mib, Capped: true}, 1, true},
		{"1.4 GiB asked", Failure{Request: 1434 * mib, Free: 5 * mib, Capped: true}, 1, false},
		{"nothing known of the failure", Failure{}, 1, false},
		{"free memory unknown without a cap", Failure{Request: 56 * mib}, 1, false},
		// The step's neighbour above is 283 itself: the size below runs
		// beside it, the answer if the step is one too high.
		{"three sizes a round", Failure{Request: 56 * mib, Free: 5 * mib, Capped: true}, 3, true},
	} {
		v := base
		v.Failed, v.K = tc.failed, tc.k
		sizes, _ := (&modelPlanner{}).Next(v)
		want := []int{282}
		if tc.k > 1 {
			want = []int{281, 282}
		}
		if got := slices.Equal(sizes, want); got != tc.near {
			t.Errorf("%s: next %v, want %v: %v", tc.name, sizes, want, tc.near)
		}
	}
}

// TestNeighbourhood: a round of K sizes in a row around the largest size
// the model expects to fit covers K-1 answers, the last of them that
// size's; the row keeps inside the bracket, and a bracket end next to it
// covers one more.
func TestNeighbourhood(t *testing.T) {
	g := Grid{Min: 1, Max: 1 << 16, Step: 1}
	g8 := Grid{Min: 8, Max: 1 << 16, Step: 8}
	for _, tc := range []struct {
		name   string
		g      Grid
		k      int
		lo, hi int
		x      float64
		want   []int
	}{
		{"around the prediction", g, 3, 128, g.Max + 1, 276.4, []int{275, 276, 277}},
		{"six a round", g, 6, 50, g.Max + 1, 100.9, []int{96, 97, 98, 99, 100, 101}},
		{"kept above lo", g, 3, 275, 300, 276.4, []int{276, 277, 278}},
		{"kept below hi", g, 3, 128, 277, 276.4, []int{274, 275, 276}},
		{"a bracket of one size", g, 3, 275, 277, 276.4, []int{276}},
		{"on the grid", g8, 3, 128, g8.Max + 8, 276.4, []int{264, 272, 280}},
	} {
		v := View{Grid: tc.g, K: tc.k, Lo: tc.lo, Hi: tc.hi}
		if got := neighbourhood(v, tc.x); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSpreadOpening: the first round of several sizes spreads them from
// the start to 16 times it, evenly on a log scale, on the grid and below
// its top, each size once.
func TestSpreadOpening(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    Grid
		k    int
		want []int
	}{
		{"three", Grid{Min: 1, Max: 1 << 16, Step: 1}, 3, []int{8, 32, 128}},
		{"four", Grid{Min: 1, Max: 1 << 16, Step: 1}, 4, []int{8, 20, 50, 128}},
		{"six", Grid{Min: 1, Max: 1 << 16, Step: 1}, 6, []int{8, 13, 24, 42, 73, 128}},
		{"multiples of 8", Grid{Min: 8, Max: 1 << 16, Step: 8}, 4, []int{8, 16, 48, 128}},
		{"a low top", Grid{Min: 1, Max: 40, Step: 1}, 3, []int{8, 32, 40}},
		{"a top just above the start", Grid{Min: 1, Max: 10, Step: 1}, 3, []int{8, 10}},
	} {
		if got := spreadOpening(tc.g, tc.g.Min-tc.g.Step, 8, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
