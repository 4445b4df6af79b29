package search

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

func (m *modelPlanner) next(v view) ([]int, float64) {
	if v.fit == nil {
		return m.opening(v), 0
	}
	sizes, predicted := m.predict(v)
	if v.growing() {
		return m.gallop.hold(v, sizes), predicted
	}
	return m.refine.hold(v, sizes), predicted
}

// predict plans where the model says the boundary is: a failure's Newton
// step when it can be trusted, else the window's candidates.
func (m *modelPlanner) predict(v view) ([]int, float64) {
	// A step whose every size failed says the failures overstate how
	// close they came (they failed mid-step): the next failure's step
	// would land one short of it again, round after round, a size at a
	// time, so the window plans the round after it.
	// A plan's limit is not such a bound: a failure of another plan below
	// the step says where that plan stops fitting.
	_, planned := v.planLimit()
	overshot := m.stepHi > 0 && v.lo == m.stepLo && v.hi < m.stepHi && !planned
	m.stepLo, m.stepHi = 0, 0
	if sizes, ok := shortfallStep(v); ok && !overshot {
		m.stepLo, m.stepHi = v.lo, v.hi
		return sizes, float64(sizes[0])
	}
	if v.refuted {
		return spread(v.g, v.lo, v.hi, v.k), 0
	}
	if m.reachTop > 0 && v.hi <= m.reachTop {
		m.reachTopFailed = true
	}
	v.reached = v.reached && !m.reachTopFailed
	sizes, hit, predicted, top := windowPlan(v, m.misses)
	m.reachTop = 0
	if top && v.reached {
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
func (m *modelPlanner) opening(v view) []int {
	if v.growing() && v.seenOK() && len(v.points) == 1 {
		// One measured peak m0 at s0. For an affine peak a + p·s with
		// a ≥ 0, the peak at j = s0·c/m0 is a + p·s0·c/m0 ≤ c whenever
		// m0 ≤ c: if c bytes are free, j fits. Jump there: it is the
		// largest size safe to expect to fit, it is often close to the
		// boundary, and a far second point makes the first slope good.
		// A start seeded near the boundary (from the history) gets a jump
		// below 2·s0: take it rather than doubling past the boundary.
		p := v.points[0]
		jump := 2 * p.Size
		if p.Bytes > 0 {
			if j := float64(p.Size) * v.cLo / float64(p.Bytes); j >= float64(v.g.max) {
				jump = v.g.max
			} else if j > float64(p.Size) {
				jump = int(j)
			}
		}
		return grow(v.g, max(jump, v.lo+v.g.step), v.k)
	}
	return bisectStep(v, m.start)
}

// windowPlan probes the candidate answers that the predicted window and the
// bracket share; hit is false when they share none, and top says it probed
// the window's top rather than its middle.
func windowPlan(v view, misses int) (sizes []int, hit bool, predicted float64, top bool) {
	f, g := v.fit, v.g
	lo64, hi64 := uint64(v.cLo), uint64(v.cHi)
	pLo := f.MaxSize(lo64) - f.Bound(lo64)
	pHi := f.MaxSize(hi64) + f.Bound(hi64)
	predicted = (f.MaxSize(lo64) + f.MaxSize(hi64)) / 2
	if math.IsNaN(pLo) || math.IsNaN(pHi) {
		return bisectStep(v, g.min), false, 0, false
	}
	// Candidate answers: the window's, on the grid, and the bracket's.
	wLo, wHi := g.floor(toInt(pLo, g)), g.floor(toInt(pHi, g))
	aLo, aHi := v.lo, v.hi-g.step
	if iLo, iHi := max(wLo, aLo), min(wHi, aHi); iLo <= iHi {
		// Proving answer a takes a at or above lo and a+step below hi.
		if (v.growing() || v.reached) && wLo <= v.lo {
			// Sizes the window allowed as the answer ran. Nothing has
			// failed: the model's figure is bending. Or the window is
			// what a failure could have reached, and lo's peak is in it:
			// the boundary is seldom in its middle, and probes there
			// creep up to the top a few sizes at a time. Its top, if it
			// fails, bounds the search. More sizes a round spread below
			// it.
			top := max(iHi, v.lo+g.step)
			return append(spread(g, v.lo, top, v.k-1), top), true, predicted, true
		}
		return spread(g, max(v.lo, iLo-g.step), min(v.hi, iHi+2*g.step), v.k), true, predicted, false
	}
	band := wHi - wLo + g.step
	for i := 0; i < misses && band < v.hi-v.lo; i++ {
		band *= 2
	}
	band = min(band, v.hi-v.lo)
	if wLo > aHi {
		// The boundary is below the window: look just under hi.
		return spread(g, max(v.lo, v.hi-band-g.step), v.hi, v.k), false, predicted, false
	}
	return spread(g, v.lo, min(v.hi, v.lo+band+g.step), v.k), false, predicted, false
}
