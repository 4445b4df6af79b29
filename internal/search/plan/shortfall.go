package plan

import (
	"math"
)

// shortfallStep is a Newton step from the failure at hi: an OOM that says
// what it asked for and what the allocator could still take missed by the
// difference, and the memory that decides an OOM grows by v.Growth a
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
// at hi by more than that allocation and MidStepSamples samples' memory
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
func shortfallStep(v View) ([]int, bool) {
	s, ok := ShortfallAnswer(v)
	if !ok {
		return nil, false
	}
	s = max(s, v.Lo+v.Grid.Step)
	sizes := []int{s}
	if min(v.K, 2) == 2 {
		if up := s + v.Grid.Step; up < v.Hi {
			sizes = append(sizes, up)
		} else if down := s - v.Grid.Step; down > v.Lo {
			sizes = []int{down, s}
		}
	}
	return sizes, true
}

// planLimit is where the plan of the failure at hi stops fitting
// (Failure.PlanLimit), in a framework's pool; ok is false when there is no
// such failure.
func (v View) planLimit() (float64, bool) {
	if !v.Pooled || v.Growing() {
		return 0, false
	}
	return v.Failed.PlanLimit(v.Hi)
}

// ShortfallAnswer is the answer the failure at hi names (see
// shortfallStep): the largest grid size at its Newton step, lo or above.
func ShortfallAnswer(v View) (int, bool) {
	f := v.Failed
	if limit, ok := v.planLimit(); ok {
		s := v.Grid.Floor(ToInt(math.Floor(limit), v.Grid))
		return s, s >= v.Lo
	}
	if v.Fit == nil || v.Growing() || v.Growth <= 0 || f.Request == 0 || (!f.Capped && f.Free == 0) || f.Free >= f.Request {
		return 0, false
	}
	short := float64(f.Request - f.Free)
	if f.Allocated == 0 && short >= v.Growth*float64(v.Grid.Step) {
		return 0, false
	}
	peak := v.Fit.Predict(v.Hi)
	if f.Allocated > 0 && (!v.Allocated || float64(f.Allocated+f.Request) > peak+v.Fit.Residual+Granularity) {
		return 0, false
	}
	x := float64(v.Hi) - short/v.Growth
	if r, ok := f.Reached(); ok && peak-float64(f.Allocated+f.Request) > MidStepSamples*v.Fit.Slope {
		if at := v.Fit.MaxSize(r); at >= float64(v.Lo) && ranFrom(v, v.Grid.Floor(ToInt(at, v.Grid))-v.Grid.Step) < 2 {
			x = min(x, at)
		}
	}
	s := v.Grid.Floor(ToInt(math.Floor(x), v.Grid))
	return s, s >= v.Lo
}

// ranFrom counts the sizes from s up that ran (below hi). Two of them at
// the estimate a failure's reach gives (its size and the neighbour, or the
// size below it and itself) mean the estimate is too low, however the
// refitted model moves it: the fit follows the sizes that ran, so its
// estimate follows lo up one size a round, and the bound from above plans
// instead.
func ranFrom(v View, s int) int {
	n := 0
	for _, p := range v.Points {
		if p.Size >= s && p.Size < v.Hi {
			n++
		}
	}
	return n
}

// MidStepSamples is how many samples' memory a failed trial may hold below
// the fitted peak, less the allocation that failed, and still be taken to
// have failed at its step's last allocation: the fit is seldom closer
// than a sample or so at the boundary, on either side of it.
const MidStepSamples = 2
