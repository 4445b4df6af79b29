package search

import (
	"slices"

	"github.com/batchfit/batchfit/internal/search/plan"
)

// view shows the planner the bracket (lo, hi) and the model.
func (d *driver) view(lo, hi int) plan.View {
	v := plan.View{Grid: d.g, K: d.k, Lo: lo, Hi: hi}
	fig, points := d.points(hi)
	v.Allocated, v.Points = fig == FigureAllocated, points
	if f, err := plan.Estimate(v.Points); err == nil {
		v.Fit = &f
		v.Growth = d.reservedSlope(hi, f.Slope)
	}
	capacity, pooled := d.capacity()
	v.Pooled = pooled
	context := 0.0
	if !pooled {
		context = d.context(hi)
	}
	v.PeakLo, v.PeakHi = expectedPeak(capacity, fig, context)
	return v
}

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
func (d *driver) planView(lo, hi int) plan.View {
	v := d.view(lo, hi)
	if hi > d.g.Max {
		return v
	}
	failed := d.belief[hi]
	v.Failed = failed.Failure
	if failed.Failure.Request == 0 {
		// A failure that says nothing of itself may be a flake (an OOM at
		// random near the limit): the capacity stays the better guide.
		return v
	}
	if v.Fit == nil && v.Allocated && len(v.Points) == 1 {
		// One success and a failure that says what it needed at least:
		// the two make a first slope, where bisection would know none.
		f := failed.Failure
		if need := f.Allocated + f.Request; f.Allocated > 0 && f.Request > 0 && float64(need) > float64(v.Points[0].Bytes) {
			pts := append([]plan.Point{}, v.Points...)
			pts = append(pts, plan.Point{Size: hi, Bytes: need})
			if fit, err := plan.Estimate(pts); err == nil {
				v.Fit = &fit
			}
		}
	}
	if v.Fit == nil {
		return v
	}
	slack := v.Fit.Residual + plan.Granularity
	top := v.Fit.Predict(hi) + slack
	bottom := 0.0
	for _, p := range v.Points {
		if p.Size == lo {
			bottom = float64(p.Bytes) - slack
		}
	}
	if max(v.PeakLo, bottom) <= min(v.PeakHi, top) {
		// The capacity still explains every trial: keep to it.
		return v
	}
	wLo, wHi := bottom, top
	if r, ok := failed.Failure.Reached(); ok && v.Allocated {
		half := float64(failed.Failure.Request-failed.Failure.Free) / 2
		if eLo, eHi := max(wLo, float64(r)-half), min(wHi, float64(r)+half); eLo <= eHi {
			v.PeakLo, v.PeakHi = max(eLo, 0), eHi
			v.Reached = true
			return v
		}
		if bottom > float64(r)+half {
			// A size that ran held more than the failure could have
			// reached: what the failures say of themselves does not
			// decide this workload's OOM (a large buffer meets
			// fragmented memory), and the capacity was wrong already.
			v.Refuted = true
			return v
		}
	}
	// Nothing places it better: the capacity window moved down to end at
	// hi's fitted peak, twice as wide at every failure that refuted it, so
	// that a model a little off stays close and one far off soon bisects.
	width := max(v.PeakHi-v.PeakLo, 2*slack)
	for s, o := range d.belief {
		if s > hi && tooLarge(o) && v.Fit.Predict(s)+slack < v.PeakLo && width < wHi-wLo {
			width *= 2
		}
	}
	wLo = max(wLo, wHi-width)
	if wLo > wHi || wHi <= 0 {
		return v
	}
	v.PeakLo, v.PeakHi = max(wLo, 0), wHi
	return v
}

// points returns the memory figure and the measured peaks of the sizes
// believed to fit below hi.
func (d *driver) points(hi int) (Figure, []plan.Point) {
	var oks []Observation
	for s, o := range d.belief {
		if fits(o) && s < hi {
			oks = append(oks, o)
		}
	}
	for _, o := range d.cfg.Prior {
		// Config.Prior's figures, where this search has none of its own.
		if _, own := d.belief[o.Size]; !own && fits(o) && o.Size < hi &&
			!slices.ContainsFunc(oks, func(k Observation) bool { return k.Size == o.Size }) {
			oks = append(oks, o)
		}
	}
	slices.SortFunc(oks, func(a, b Observation) int { return a.Size - b.Size })
	fig := chooseFigure(oks)
	if fig == FigureNone {
		return fig, nil
	}
	points := make([]plan.Point, len(oks))
	for i, o := range oks {
		points[i] = plan.Point{Size: o.Size, Bytes: fig.of(o.Memory)}
	}
	return fig, points
}

// capacity is the memory a trial's peak must fit in: Capacity, or the
// smallest pool limit a trial's framework reported when that is less (JAX's
// pool is 75 % of the card by default). pooled says it is such a limit: a
// framework's own pool lies outside the CUDA context, as an allocator cap
// does.
func (d *driver) capacity() (capacity uint64, pooled bool) {
	capacity = d.cfg.Capacity
	for _, o := range d.belief {
		if l := o.Memory.Limit; l > 0 && (capacity == 0 || l < capacity) {
			capacity, pooled = l, true
		}
	}
	return capacity, pooled
}

// reservedSlope is the slope of the reserved peaks of the sizes believed
// to fit below hi, or def when some size reports none or they do not grow
// (a framework's preallocated pool).
func (d *driver) reservedSlope(hi int, def float64) float64 {
	var pts []plan.Point
	for s, o := range d.belief {
		if !fits(o) || s >= hi {
			continue
		}
		if o.Memory.Reserved == 0 {
			return def
		}
		pts = append(pts, plan.Point{Size: s, Bytes: o.Memory.Reserved})
	}
	if f, err := plan.Estimate(pts); err == nil {
		return f.Slope
	}
	return def
}

// context is what the capacity loses outside the allocator's figures: 0
// under an allocator cap, else NVML's peak less the reserved peak of the
// same trial (the CUDA context), the least seen; -1 when unknown.
func (d *driver) context(hi int) float64 {
	if d.cfg.AllocatorCap {
		return 0
	}
	ctx := -1.0
	for s, o := range d.belief {
		m := o.Memory
		if fits(o) && s < hi && m.Device > m.Reserved && m.Reserved > 0 {
			if c := float64(m.Device - m.Reserved); ctx < 0 || c < ctx {
				ctx = c
			}
		}
	}
	return ctx
}

// A workload whose figure is peak allocated memory runs out before that
// figure reaches the capacity by whatever the allocator's counters do not
// see: on a whole card, the CUDA context and other memory outside PyTorch,
// about 0.3–0.6 GiB per process (DESIGN.md); under an allocator cap
// (--memory-limit through per_process_memory_fraction), only the
// allocator's slack (reserved but unallocated, rounding), because the
// context lies outside the cap. When the context was measured (NVML and the
// adapter on the same trial) or lies outside the cap, only the slack is
// unknown. This only decides where to look first; the answer is exact
// wherever the boundary really is.
const (
	allocatedOverheadLo = 0
	allocatedOverheadHi = 0.6 * (1 << 30)
	allocatorSlackHi    = 0.25 * (1 << 30)
)

// expectedPeak returns the window in which the peak at the boundary is
// expected, for a capacity in units of fig. context is the measured memory
// outside the allocator's figures, or -1 when it is unknown. NVML figures
// include the context, so their window is the capacity itself.
func expectedPeak(capacity uint64, fig Figure, context float64) (lo, hi float64) {
	c := float64(capacity)
	if fig != FigureAllocated {
		return c, c
	}
	if context >= 0 {
		c -= context
		return max(c-allocatorSlackHi, 0), max(c, 0)
	}
	return max(c-allocatedOverheadHi, 0), max(c-allocatedOverheadLo, 0)
}
