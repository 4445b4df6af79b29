package search

import (
	"math"
	"slices"

	"github.com/batchfit/batchfit/internal/memmodel"
)

// planner chooses the next sizes to probe. Every size it returns lies
// strictly inside the open bracket (v.lo, v.hi), so no settled size is ever
// run twice; there is always at least one such size when it is called.
type planner interface {
	next(v view) (sizes []int, predicted float64)
}

// view is what a planner sees of the search.
type view struct {
	g grid
	k int // sizes per round
	// lo is the largest size believed to fit (g.min-step when none) and hi
	// the smallest believed not to above it (g.max+step when none): the
	// driver's bracket.
	lo, hi int
	// points are the measured peaks of the sizes believed to fit below hi,
	// in units of fig, and fit the model made from them (nil when none
	// could be made).
	fig    Figure
	points []memmodel.Point
	fit    *memmodel.Fit
	// [cLo, cHi] is where the peak at the boundary is expected to be, in
	// units of the memory figure.
	cLo, cHi float64
	// failed is what the failure at hi said of itself (the zero Failure
	// when nothing did, or hi has not been tried).
	failed Failure
	// growth is how much the memory that decides an OOM grows a sample,
	// in bytes, from the sizes that fitted: their reserved peaks where all
	// report one that grows (an allocator cap limits reserved memory, and
	// a card runs out of it), else the fit's slope; 0 with no fit.
	growth float64
	// refuted says the trials contradict every window the failures and
	// the capacity give (planView): the model has nothing left to place
	// the boundary with, and bisection does better than its guesses.
	refuted bool
	// reached says [cLo, cHi] is where the failure at hi could have
	// reached (planView), not the capacity.
	reached bool
	// pooled says the capacity is a framework's own pool (JAX's), which
	// plans each step's buffers to fit it (driver.capacity).
	pooled bool
}

func (v view) growing() bool { return v.hi > v.g.max }
func (v view) seenOK() bool  { return v.lo >= v.g.min }

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

// bisectPlanner grows ×2 from the start until a size fails or the top of
// the range runs, then splits the bracket into k+1 parts per round.
type bisectPlanner struct{ start int }

func (b *bisectPlanner) next(v view) ([]int, float64) {
	return bisectStep(v, b.start), 0
}

func bisectStep(v view, start int) []int {
	if !v.growing() {
		return spread(v.g, v.lo, v.hi, v.k)
	}
	from := start
	if v.seenOK() {
		from = 2 * v.lo
	}
	return grow(v.g, from, v.k)
}

// grow returns k sizes doubling from `from`, the last clamped to the top.
func grow(g grid, from, k int) []int {
	var sizes []int
	for s := from; len(sizes) < k; s *= 2 {
		sizes = append(sizes, g.clamp(g.floor(s)))
		if s >= g.max {
			break
		}
	}
	return sizes
}

// spread returns up to k grid sizes strictly between x and y, evenly
// spaced: all of them when there are no more than k, else the k that cut
// the interval into k+1 near-equal parts (the middle one when k is 1).
func spread(g grid, x, y, k int) []int {
	m := (y - x) / g.step // parts of one step between x and y
	if m <= 1 {
		return nil
	}
	var sizes []int
	if m-1 <= k {
		for s := x + g.step; s < y; s += g.step {
			sizes = append(sizes, s)
		}
		return sizes
	}
	for i := 1; i <= k; i++ {
		sizes = append(sizes, x+i*m/(k+1)*g.step)
	}
	return sizes
}

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
	// would land one short of it again, round after round (Lightning's
	// H200 trials, two GPUs: 2025, 2023, 2021, ... with 1989 run), so the
	// window plans the round after it.
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

// gallop keeps the model from creeping up while nothing has failed: a
// figure that grows slower than the fit (a bend, a wrong intercept) makes
// every fit predict the boundary just above the last size that ran. Each
// round is meant to bring the largest size that ran (lo) at least halfway
// to the boundary: its peak half the way to the expected capacity, the
// growing phase's bracket in memory. After two rounds in a row that did
// not, every round reaches at least twice as far above lo as the last one
// did, until one halves the gap: the growth then takes a logarithmic
// number of rounds however the model errs, and a model that closes in is
// left alone.
type gallop struct {
	from    int     // lo when the last round was planned; 0 when none was
	gap     float64 // the capacity less lo's peak then
	streak  int     // rounds in a row that did not halve the gap
	advance int     // how far the last round took lo
}

func (gl *gallop) hold(v view, sizes []int) []int {
	from, gap := gl.from, gl.gap
	gl.from, gl.gap = v.lo, v.cLo-peakAt(v, v.lo)
	if from <= 0 || v.lo <= from || gl.gap <= gap/2 {
		gl.streak = 0
		return sizes
	}
	gl.advance = v.lo - from
	if gl.streak++; gl.streak < 2 || len(sizes) == 0 {
		return sizes
	}
	least := v.g.clamp(v.g.floor(v.lo + 2*gl.advance))
	if top := slices.Max(sizes); top < least {
		sizes[slices.Index(sizes, top)] = least
	}
	return sizes
}

// peakAt is the measured peak at size s, 0 when s did not run.
func peakAt(v view, s int) float64 {
	for _, p := range v.points {
		if p.Size == s {
			return float64(p.Bytes)
		}
	}
	return 0
}

// refineGuard keeps the model from creeping in a closed bracket, as
// Illinois's rule keeps regula falsi from it: a model that is wrong the
// same way each time (a figure that bends, failures that misstate their
// shortfall) predicts the boundary just past the last trial, round after
// round, and the bracket barely narrows. A round creeps when it neither
// narrowed the bracket as bisection would (to 1/(k+1)) nor moved its ends
// by half as much as the round before at most: a model closing in on one
// point from one side (lo moving 13, 4, 1 sizes in one of the simulator's
// shapes, two sizes a round) does not creep. After refineSlack creeping
// rounds in a row (one, once the guard has had to act), the next round
// reaches further from the side the last one moved: twice as far as that
// one moved it, or as the guard's last step, whichever is more, but no
// further than the middle. The steps double until they bisect, so however
// the model errs the bracket closes in a small multiple of bisection's
// rounds, and a model that is right is never moved.
type refineGuard struct {
	lo, hi  int  // the bracket the last round was planned in
	planned bool // whether lo, hi hold one
	streak  int  // rounds in a row that did not narrow the bracket
	step    int  // the guard's last step; 0 before it acted
	move    int  // how far the last round moved the bracket's ends
}

// refineSlack is how many rounds in a row the model may creep before the
// guard first acts: three, as a model that reads failures' figures may
// step twice on one side before they place the boundary (HF's 77 and 73
// failed before 71 ran), and moving the third round cost that replay a
// trial.
const refineSlack = 3

func (r *refineGuard) hold(v view, sizes []int) []int {
	lo, hi, planned := r.lo, r.hi, r.planned
	r.lo, r.hi, r.planned = v.lo, v.hi, true
	if !planned || len(sizes) == 0 {
		return sizes
	}
	move := (v.lo - lo) + (hi - v.hi)
	lastMove := r.move
	r.move = move
	if (v.hi-v.lo)*(v.k+1) <= hi-lo+v.k*v.g.step || 2*move <= lastMove {
		r.streak = 0
		return sizes
	}
	r.streak++
	if r.streak < refineSlack && r.step == 0 {
		return sizes
	}
	r.streak = 0
	if v.lo > lo {
		r.step = max(2*r.step, 2*(v.lo-lo))
		least := min(v.g.floor(v.lo+r.step), v.g.floor(v.lo+(v.hi-v.lo)/2))
		if top := slices.Max(sizes); top < least {
			sizes[slices.Index(sizes, top)] = least
		}
		return sizes
	}
	r.step = max(2*r.step, 2*(hi-v.hi))
	most := max(v.g.ceil(v.hi-r.step), v.g.ceil(v.hi-(v.hi-v.lo)/2))
	if bottom := slices.Min(sizes); bottom > most {
		sizes[slices.Index(sizes, bottom)] = most
	}
	return sizes
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

// shortfallStep is a Newton step from the failure at hi: an OOM that says
// what it asked for and what the allocator could still take missed by the
// difference, and the memory that decides an OOM grows by v.growth a
// sample, so the boundary is about hi − shortfall/growth. It returns the
// largest grid size there and its neighbour above (as many of the two as
// a round holds): the answer and its first failure when the step is right.
// Once the step ran and fitted, it is lo, and the neighbour comes next.
// When the neighbour above is hi itself, a round of two takes the one
// below instead: the answer when the step is a size too high (SimCLR's 283
// from 284's failure), so that the round closes the bracket either way.
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
// allocator needed memory the model does not see, HF's fragmented logits
// buffer, and a step from it lands far below), or, when it did not say
// what it held, the step is a single grid step. A step below lo means the
// failure overstated the shortfall, and the window plans.
//
// In a framework's pool the step is the failing plan's limit instead
// (planLimit): XLA asks for a step's buffers at once, about in proportion
// to the batch, so where that buffer fits is known without a slope, which
// its bending peaks would get wrong (XLA fits its plans to the pool). Most
// of the JAX example's failures at 24 GiB (677 to 707) named 671.3 to
// 671.7 this way, the answer, and 2971's on the whole card 2970.6, which
// it proved. Far above, the buffer grows faster than the batch (918 asked
// 40.9 MB a sample there, 4070 44.3 on the whole card, against 37.8 near
// the boundary), and the limit lies below the boundary: once sizes at it
// ran, the window plans again.
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
	if f.Allocated > 0 && (v.fig != FigureAllocated || float64(f.Allocated+f.Request) > peak+v.fit.Residual+memmodel.Granularity) {
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
// estimate follows lo up one size a round (Lightning on the H200: 1995,
// 1996, 1997 ran below a boundary at 2003), and the bound from above plans
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
// have failed at its step's last allocation: the fit is seldom closer at
// the boundary (SimCLR's 282 ran 0.35 samples below it, and its 283 failed
// 1.1 samples short of it).
const midStepSamples = 2

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
			// the boundary is seldom in its middle (HF on the whole H200:
			// 385, 403, 412, 417, 419, 420, 421 ran up to its top, 420,
			// and the boundary was 424). Its top, if it fails, bounds the
			// search; a probe in the middle only creeps. More sizes a
			// round spread below it.
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

// toInt converts a predicted size to an int just outside the grid's range
// at most, so that wild predictions cannot overflow.
func toInt(x float64, g grid) int {
	lo, hi := float64(g.min-2*g.step), float64(g.max+2*g.step)
	return int(math.Floor(min(max(x, lo), hi)))
}

// marginPlanner looks for the largest size whose peak is within the margin
// limit. The limit is exact (no unseen overhead), so the window is the
// fit's prediction and its bound.
type marginPlanner struct{ misses int }

func (m *marginPlanner) next(v view) ([]int, float64) {
	if v.fit == nil {
		return spread(v.g, v.lo, v.hi, v.k), 0
	}
	sizes, hit, predicted, _ := windowPlan(v, m.misses)
	if hit {
		m.misses = 0
	} else {
		m.misses++
	}
	return sizes, predicted
}
