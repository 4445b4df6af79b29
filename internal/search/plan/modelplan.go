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
	start  int
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

func (m *modelPlanner) Next(v View) ([]int, float64) {
	if v.Fit == nil {
		return m.opening(v), 0
	}
	sizes, predicted := m.predict(v)
	if v.Growing() {
		return m.gallop.hold(v, sizes), predicted
	}
	return m.refine.hold(v, sizes), predicted
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
	return bisectStep(v, m.start)
}

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
