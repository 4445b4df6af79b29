package search

import (
	"math"
)

// shortfallStep is a Newton step from the failure at hi: an OOM that says
// what it asked for and what the allocator could still take missed by the
// difference, and the memory that decides an OOM grows by v.growth a
// sample, so the boundary is about hi − shortfall/growth. It returns the
// largest grid size there and its neighbour above (as many of the two as
// a round holds): the answer and its first failure when the step is right.
// Once the step ran and fitted, it is lo, and the neighbour comes next.
// When the neighbour above is hi itself, a round of two takes the one
// below instead: the answer when the step is a size too high, so that the
// round closes the bracket either way.
//
// The shortfall is what the trial lacked only when the allocation that
// failed was its step's last. A trial that held less than the model's peak
// at hi by more than that allocation and midStepSamples samples' memory
// failed before its peak, with more still to allocate: it lacked more, and
// the step from its shortfall is only a bound from above. The size whose
// fitted peak is what that trial could have reached (what it held and what
// was free, Failure.Reached) is the estimate then, below the bound, until
// sizes at it ran (ranFrom).
//
// It is taken only when the failure agrees with the model: what the trial
// held and asked for is no more than the fitted peak at hi (else the
// allocator needed memory the model does not see, such as a large buffer in
// fragmented memory, and a step from it lands far below), or, when it did
// not say what it held, the step is a single grid step. A step below lo
// means the failure overstated the shortfall, and the window plans.
//
// In a framework's pool the step is the failing plan's limit instead
// (planLimit): XLA asks for a step's buffers at once, about in proportion
// to the batch, so where that buffer fits is known without a slope, which
// its bending peaks would get wrong (XLA fits its plans to the pool). Far
// above the boundary the buffer grows faster than the batch, and the limit
// lies below the boundary: once sizes at it ran, the window plans again.
// The measurements are in docs/design/xla-pool-plan-limits.md.
func shortfallStep(v view) ([]int, bool) {
	s, ok := shortfallAnswer(v)
	if !ok {
		return nil, false
	}
	s = max(s, v.lo+v.g.step)
	sizes := []int{s}
	if min(v.k, 2) == 2 {
		if up := s + v.g.step; up < v.hi {
			sizes = append(sizes, up)
		} else if down := s - v.g.step; down > v.lo {
			sizes = []int{down, s}
		}
	}
	return sizes, true
}

// planLimit is where the plan of the failure at hi stops fitting
// (Failure.planLimit), in a framework's pool; ok is false when there is no
// such failure.
func (v view) planLimit() (float64, bool) {
	if !v.pooled || v.growing() {
		return 0, false
	}
	return v.failed.planLimit(v.hi)
}

// shortfallAnswer is the answer the failure at hi names (see
// shortfallStep): the largest grid size at its Newton step, lo or above.
func shortfallAnswer(v view) (int, bool) {
	f := v.failed
	if limit, ok := v.planLimit(); ok {
		s := v.g.floor(toInt(math.Floor(limit), v.g))
		return s, s >= v.lo
	}
	if v.fit == nil || v.growing() || v.growth <= 0 || f.Request == 0 || (!f.Capped && f.Free == 0) || f.Free >= f.Request {
		return 0, false
	}
	short := float64(f.Request - f.Free)
	if f.Allocated == 0 && short >= v.growth*float64(v.g.step) {
		return 0, false
	}
	peak := v.fit.Predict(v.hi)
	if f.Allocated > 0 && (v.fig != FigureAllocated || float64(f.Allocated+f.Request) > peak+v.fit.Residual+granularity) {
		return 0, false
	}
	x := float64(v.hi) - short/v.growth
	if r, ok := f.Reached(); ok && peak-float64(f.Allocated+f.Request) > midStepSamples*v.fit.Slope {
		if at := v.fit.MaxSize(r); at >= float64(v.lo) && ranFrom(v, v.g.floor(toInt(at, v.g))-v.g.step) < 2 {
			x = min(x, at)
		}
	}
	s := v.g.floor(toInt(math.Floor(x), v.g))
	return s, s >= v.lo
}

// ranFrom counts the sizes from s up that ran (below hi). Two of them at
// the estimate a failure's reach gives (its size and the neighbour, or the
// size below it and itself) mean the estimate is too low, however the
// refitted model moves it: the fit follows the sizes that ran, so its
// estimate follows lo up one size a round, and the bound from above plans
// instead.
func ranFrom(v view, s int) int {
	n := 0
	for _, p := range v.points {
		if p.Size >= s && p.Size < v.hi {
			n++
		}
	}
	return n
}

// midStepSamples is how many samples' memory a failed trial may hold below
// the fitted peak, less the allocation that failed, and still be taken to
// have failed at its step's last allocation: the fit is seldom closer
// than a sample or so at the boundary, on either side of it.
const midStepSamples = 2
