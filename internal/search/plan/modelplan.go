package plan

import (
	"math"
	"slices"
)

// modelPlanner probes where the memory model predicts the boundary, and
// falls back to bisection steps when the model is missing or keeps missing.
//
// It starts small (two cheap sizes give the first fit), then asks the fit
// where the peak reaches the expected capacity window, widened by the fit's
// error bound. The window's candidate answers that the bracket still allows
// are probed: the middle one, or all of them with their upper neighbour
// when they fit in one round. Every success near the boundary is refitted,
// which makes the slope and the bound tight. When the window lies outside
// the bracket the prediction has missed: the planner probes a band of the
// bracket next to the window, twice as wide at every consecutive miss, which
// becomes plain bisection after a few. A failure whose figures say how much
// it missed by steps the boundary straight to where that much less memory
// is needed (shortfallStep). A model can also hit its window every time and
// still creep, one small step after another: while growing it is made to
// gallop (gallop), and once the bracket is closed its steps are made to
// double until they bisect (refineGuard).
type modelPlanner struct {
	start int
	// around says start is a guess of the answer (the user's --start, or
	// an earlier run's answer), not a small size to begin from.
	around bool
	misses int
	gallop gallop
	refine refineGuard
	// stepLo and stepHi are the bracket the last round's shortfall step
	// was planned in; 0 when the last round was not one.
	stepLo, stepHi int
	// reachTop is the top of a reach window the last round probed (0 when
	// it did not), and reachTopFailed says one such top failed: the
	// failures' reach then overstates this workload's boundary, and a top
	// only moves the window's end down a size a round, so the window's
	// middle plans from then on.
	reachTop       int
	reachTopFailed bool
}

// NewModel returns the planner that probes where the memory model
// predicts the boundary, starting at start (modelPlanner).
func NewModel(start int) Planner { return &modelPlanner{start: start} }

// NewModelAround returns the model planner for a start that guesses the
// answer: a first round of several sizes spreads around it rather than up
// from it (spreadAround).
func NewModelAround(start int) Planner { return &modelPlanner{start: start, around: true} }

func (m *modelPlanner) Next(v View) ([]int, float64) {
	if v.Fit == nil {
		return m.opening(v), 0
	}
	sizes, predicted := m.predict(v)
	if v.Growing() {
		return m.gallop.hold(v, sizes), predicted
	}
	return slopeProbe(v, m.refine.hold(v, sizes)), predicted
}

// slopeProbe makes room in a round for a second measured peak when only
// one size has run. The fit is then that size's peak and a failure's
// figure (planView), which is only what the failure needed at least: its
// slope is too small, and its prediction too high, by however much more
// the failure would have needed. Each failure of it would say no more,
// and the rounds would creep down. A size below the one that ran, half
// of it, measures the slope instead; it takes the place of the round's
// largest size. A round of one size is left as it is.
func slopeProbe(v View, sizes []int) []int {
	if v.K < 2 || len(v.Points) != 1 || len(sizes) == 0 {
		return sizes
	}
	below := v.Grid.Floor(v.Points[0].Size / 2)
	if below < v.Grid.Min || below >= v.Points[0].Size {
		return sizes
	}
	sizes = slices.Sorted(slices.Values(sizes))
	if len(sizes) >= v.K {
		sizes = sizes[:v.K-1]
	}
	return append([]int{below}, sizes...)
}

// predict plans where the model says the boundary is: a failure's Newton
// step when it can be trusted, else the window's candidates.
func (m *modelPlanner) predict(v View) ([]int, float64) {
	// A step whose every size failed says the failures overstate how
	// close they came (they failed mid-step): the next failure's step
	// would land one short of it again, round after round, a size at a
	// time, so the window plans the round after it.
	// A plan's limit is not such a bound: a failure of another plan below
	// the step says where that plan stops fitting.
	_, planned := v.planLimit()
	overshot := m.stepHi > 0 && v.Lo == m.stepLo && v.Hi < m.stepHi && !planned
	m.stepLo, m.stepHi = 0, 0
	if sizes, ok := shortfallStep(v); ok && !overshot {
		m.stepLo, m.stepHi = v.Lo, v.Hi
		return sizes, float64(sizes[0])
	}
	if v.Refuted {
		return Spread(v.Grid, v.Lo, v.Hi, v.K), 0
	}
	if m.reachTop > 0 && v.Hi <= m.reachTop {
		m.reachTopFailed = true
	}
	v.Reached = v.Reached && !m.reachTopFailed
	sizes, hit, predicted, top := windowPlan(v, m.misses)
	m.reachTop = 0
	if top && v.Reached {
		m.reachTop = slices.Max(sizes)
	}
	if hit {
		m.misses = 0
	} else {
		m.misses++
	}
	return sizes, predicted
}

// opening plans before there is a fit: the start, then one jump.
func (m *modelPlanner) opening(v View) []int {
	if v.Growing() && v.SeenOK() && len(v.Points) == 1 {
		// One measured peak m0 at s0. For an affine peak a + p·s with
		// a ≥ 0, the peak at j = s0·c/m0 is a + p·s0·c/m0 ≤ c whenever
		// m0 ≤ c: if c bytes are free, j fits. Jump there: it is the
		// largest size safe to expect to fit, it is often close to the
		// boundary, and a far second point makes the first slope good.
		// A start seeded near the boundary (from the history) gets a jump
		// below 2·s0: take it rather than doubling past the boundary.
		p := v.Points[0]
		jump := 2 * p.Size
		if p.Bytes > 0 {
			if j := float64(p.Size) * v.PeakLo / float64(p.Bytes); j >= float64(v.Grid.Max) {
				jump = v.Grid.Max
			} else if j > float64(p.Size) {
				jump = int(j)
			}
		}
		return grow(v.Grid, max(jump, v.Lo+v.Grid.Step), v.K)
	}
	if v.K >= 2 && m.around && v.Growing() && !v.SeenOK() {
		return spreadAround(v.Grid, v.Lo, m.start, v.K)
	}
	if v.K >= 3 && v.Growing() && !v.SeenOK() {
		return spreadOpening(v.Grid, v.Lo, m.start, v.K)
	}
	return bisectStep(v, m.start)
}

// spreadOpening is the first round when it holds three sizes or more:
// k sizes from the start up to openingSpan times it, evenly apart on a log
// scale (8, 32, 128 for three). Sizes close together fit a line that
// extrapolates badly to the boundary, and the next round predicts from
// this one; sizes far above it mostly fail, and a failure so far above
// its limit that it ends at once leaves no figure of its own.
func spreadOpening(g Grid, lo, start, k int) []int {
	return logSpread(g, lo, max(start, lo+g.Step), k, 0)
}

// spreadAround is the first round of several sizes when the start guesses
// the answer: k sizes over openingSpan, evenly apart on a log scale, with
// the start among them and as many below it as above (one more below
// when k is even): start/4, start, start×4 for three, start/16 and the
// start for two. Sizes only above a start near the boundary would all
// fail, and one success with failures gives no slope; the sizes below it
// fit, and their peaks give the line the next round predicts from.
func spreadAround(g Grid, lo, start, k int) []int {
	return logSpread(g, lo, start, k, k/2)
}

// logSpread is k grid sizes over openingSpan, evenly apart on a log scale,
// the first below sizes under from and the rest from it up; each above lo
// and the one before it, none above the grid's top.
func logSpread(g Grid, lo, from, k, below int) []int {
	var sizes []int
	for i := range k {
		e := float64(i-below) / float64(k-1)
		s := max(g.Clamp(g.Floor(int(float64(from)*math.Pow(openingSpan, e)))), lo+g.Step)
		if len(sizes) > 0 && s <= sizes[len(sizes)-1] {
			s = sizes[len(sizes)-1] + g.Step
		}
		if s > g.Max {
			break
		}
		sizes = append(sizes, s)
	}
	return sizes
}

// openingSpan is how far above the start the first round of several sizes
// reaches: far enough that the line through its peaks predicts the
// boundary within a few samples, near enough that its sizes mostly fit.
const openingSpan = 16

// windowPlan probes the candidate answers that the predicted window and the
// bracket share; hit is false when they share none, and top says it probed
// the window's top rather than its middle.
func windowPlan(v View, misses int) (sizes []int, hit bool, predicted float64, top bool) {
	f, g := v.Fit, v.Grid
	lo64, hi64 := uint64(v.PeakLo), uint64(v.PeakHi)
	pLo := f.MaxSize(lo64) - f.Bound(lo64)
	pHi := f.MaxSize(hi64) + f.Bound(hi64)
	predicted = (f.MaxSize(lo64) + f.MaxSize(hi64)) / 2
	if math.IsNaN(pLo) || math.IsNaN(pHi) {
		return bisectStep(v, g.Min), false, 0, false
	}
	// Candidate answers: the window's, on the grid, and the bracket's.
	wLo, wHi := g.Floor(ToInt(pLo, g)), g.Floor(ToInt(pHi, g))
	aLo, aHi := v.Lo, v.Hi-g.Step
	if iLo, iHi := max(wLo, aLo), min(wHi, aHi); iLo <= iHi {
		// Proving answer a takes a at or above lo and a+step below hi.
		if (v.Growing() || v.Reached) && wLo <= v.Lo {
			// Sizes the window allowed as the answer ran. Nothing has
			// failed: the model's figure is bending. Or the window is
			// what a failure could have reached, and lo's peak is in it:
			// the boundary is seldom in its middle, and probes there
			// creep up to the top a few sizes at a time. Its top, if it
			// fails, bounds the search. More sizes a round spread below
			// it.
			top := max(iHi, v.Lo+g.Step)
			return append(Spread(g, v.Lo, top, v.K-1), top), true, predicted, true
		}
		if n := (iHi-iLo)/g.Step + 1; v.K >= 3 && n > v.K-1 && n <= 3*v.K {
			return neighbourhood(v, f.MaxSize(hi64)), true, predicted, false
		}
		return Spread(g, max(v.Lo, iLo-g.Step), min(v.Hi, iHi+2*g.Step), v.K), true, predicted, false
	}
	band := wHi - wLo + g.Step
	for i := 0; i < misses && band < v.Hi-v.Lo; i++ {
		band *= 2
	}
	band = min(band, v.Hi-v.Lo)
	if wLo > aHi {
		// The boundary is below the window: look just under hi.
		return Spread(g, max(v.Lo, v.Hi-band-g.Step), v.Hi, v.K), false, predicted, false
	}
	return Spread(g, v.Lo, min(v.Hi, v.Lo+band+g.Step), v.K), false, predicted, false
}

// neighbourhood returns K grid sizes in a row inside the bracket around
// x, the largest size the model expects to fit (the window's top, where
// the peak reaches the capacity itself): x's answer and its neighbours on
// both sides. K sizes in a row close the bracket on any of the K-1 answers
// among them (one fits, the next does not), so a round whose window holds
// a few more candidates than that closes when the model is right, and
// leaves a bracket that the next round closes when it is not. The answers
// it covers end at x's: a trial at the boundary loses only the allocator's
// rounding below the capacity, seldom the whole slack the window allows,
// so the boundary lies near the window's top. A bracket end next to the row
// covers one more.
func neighbourhood(v View, x float64) []int {
	g := v.Grid
	first := g.Floor(ToInt(x, g)) - (v.K-2)*g.Step
	first = max(min(first, v.Hi-v.K*g.Step), v.Lo+g.Step)
	var sizes []int
	for s := first; len(sizes) < v.K && s < v.Hi; s += g.Step {
		sizes = append(sizes, s)
	}
	return sizes
}
