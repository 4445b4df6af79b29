package search

import (
	"github.com/batchfit/batchfit/internal/memmodel"
)

// planView is the view a planner plans the bracket (lo, hi) from: the
// model's, with the window moved by what the trials said beyond the
// capacity. A failure at hi says the figure at the boundary is below hi's
// fitted peak, and the success at lo that it is at least lo's measured
// peak: when the capacity window lies outside that, the capacity was wrong
// for this workload (fragmentation, a large last allocation, memory
// outside the figure). An OOM that says what it held and what it could
// still take (Failure.Reached) then places the boundary's figure within
// half its shortfall of that; else the window moves down below hi's fitted
// peak and widens at every failure that refutes it, so a prediction that
// failed moves the next one decisively instead of one size at a time.
//
// The planner and clearRoom use it; modelRulesOut, which lets the proof
// believe a failure on fewer re-runs, judges by the capacity alone, never
// by the failures themselves. Only a failure that reports its allocation
// narrows the window.
func (d *driver) planView(lo, hi int) view {
	v := d.view(lo, hi)
	if hi > d.g.max {
		return v
	}
	failed := d.belief[hi]
	v.failed = failed.Failure
	if failed.Failure.Request == 0 {
		// A failure that says nothing of itself may be a flake (an OOM at
		// random near the limit): the capacity stays the better guide.
		return v
	}
	if v.fit == nil && v.fig == FigureAllocated && len(v.points) == 1 {
		// One success and a failure that says what it needed at least:
		// the two make a first slope, where bisection would know none.
		f := failed.Failure
		if need := f.Allocated + f.Request; f.Allocated > 0 && f.Request > 0 && float64(need) > float64(v.points[0].Bytes) {
			pts := append([]memmodel.Point{}, v.points...)
			pts = append(pts, memmodel.Point{Size: hi, Bytes: need})
			if fit, err := memmodel.Estimate(pts); err == nil {
				v.fit = &fit
			}
		}
	}
	if v.fit == nil {
		return v
	}
	slack := v.fit.Residual + memmodel.Granularity
	top := v.fit.Predict(hi) + slack
	bottom := 0.0
	for _, p := range v.points {
		if p.Size == lo {
			bottom = float64(p.Bytes) - slack
		}
	}
	if max(v.cLo, bottom) <= min(v.cHi, top) {
		// The capacity still explains every trial: keep to it.
		return v
	}
	wLo, wHi := bottom, top
	if r, ok := failed.Failure.Reached(); ok && v.fig == FigureAllocated {
		half := float64(failed.Failure.Request-failed.Failure.Free) / 2
		if eLo, eHi := max(wLo, float64(r)-half), min(wHi, float64(r)+half); eLo <= eHi {
			v.cLo, v.cHi = max(eLo, 0), eHi
			v.reached = true
			return v
		}
		if bottom > float64(r)+half {
			// A size that ran held more than the failure could have
			// reached: what the failures say of themselves does not
			// decide this workload's OOM (HF's logits buffer meets
			// fragmented memory), and the capacity was wrong already.
			v.refuted = true
			return v
		}
	}
	// Nothing places it better: the capacity window moved down to end at
	// hi's fitted peak, twice as wide at every failure that refuted it, so
	// that a model a little off stays close and one far off soon bisects.
	width := max(v.cHi-v.cLo, 2*slack)
	for s, o := range d.belief {
		if s > hi && tooLarge(o) && v.fit.Predict(s)+slack < v.cLo && width < wHi-wLo {
			width *= 2
		}
	}
	wLo = max(wLo, wHi-width)
	if wLo > wHi || wHi <= 0 {
		return v
	}
	v.cLo, v.cHi = max(wLo, 0), wHi
	return v
}
