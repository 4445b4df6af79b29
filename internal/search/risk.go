package search

import (
	"maps"
	"math"
	"slices"

	"github.com/batchfit/batchfit/internal/search/plan"
)

// Risk says where a boundary's failures put sizes at risk: by what they
// asked for and what was free, sizes from Size up can fail as they did,
// however often some of them ran.
type Risk struct {
	Size int // the smallest size at risk; the safe side is the one below
	// From is the size whose failure missed by Shortfall bytes, asking
	// for Slope bytes a sample.
	From             int
	Shortfall, Slope float64
}

// riskFromFailures returns where the failures put sizes at risk, for a
// workload whose framework plans a step's memory in its own pool (XLA's:
// Memory.Limit reported). There an OOM is the step's planned buffer not
// fitting in what the pool had free (the parameters and optimizer state
// are held apart), and that buffer is the step's activations, in
// proportion to the batch. XLA may plan a size differently from one
// process to the next: a plan that needs more stops fitting lower, and
// sizes above run only when another plan is drawn. A failure says where
// its own plan stops fitting: at size × free / request, where the buffer
// scaled down to a smaller batch fits what was free (a part that does not
// grow, as buffers the size of the parameters, puts that limit a little
// high, never low). The measurements are in
// docs/design/xla-pool-plan-limits.md.
//
// Sizes from that limit up are at risk when a size above it ran: another
// plan was drawn there, which the failing plan's size would not fit. The
// limit must lie more than plan.MidStepSamples below the failure (a failure
// next to its limit says nothing of plans), and the size that ran must be
// the failure's neighbour below, or the limit corroborated by another
// failure's (corroborated): a buffer that grows faster than the batch
// gives a far failure a limit below the boundary, and sizes between run
// with one plan. A flaky size's failure places it however close. The
// smallest limit of all the failures that qualify is taken. Slopes between
// failures are no guide: failures of several plans lie on several lines.
func (d *driver) riskFromFailures() (Risk, bool) {
	if _, pooled := d.capacity(); !pooled {
		return Risk{}, false
	}
	last := map[int]Failure{}
	limits := map[int]float64{}
	for _, o := range d.trials {
		if limit, ok := o.Failure.PlanLimit(o.Size); tooLarge(o) && ok {
			last[o.Size], limits[o.Size] = o.Failure, limit
		}
	}
	var risk Risk
	for _, from := range slices.Sorted(maps.Keys(last)) {
		f, limit := last[from], limits[from]
		if !d.flaky[from] {
			if float64(from)-limit <= plan.MidStepSamples {
				continue
			}
			besideRan, _ := d.tally(from - d.g.Step) // its neighbour below
			if besideRan == 0 && !(corroborated(limits, from) && d.ranBetween(limit+1, from)) {
				continue
			}
		}
		safe := d.g.Floor(plan.ToInt(math.Floor(limit), d.g))
		if safe < d.g.Min || (risk.Size != 0 && safe+d.g.Step >= risk.Size) {
			continue
		}
		risk = Risk{Size: safe + d.g.Step, From: from, Shortfall: float64(f.Request - f.Free),
			Slope: float64(f.Request) / float64(from)}
	}
	return risk, risk.Size != 0
}

// corroborated reports whether another failure's limit (size × free /
// request, by size) agrees with the one at from closely enough that its
// buffer is in proportion to the batch between them: then the limit is
// where the failing plan stops fitting, to within a sample. A buffer that
// grows faster than the batch (a contrastive loss's batch × batch logits)
// puts a far failure's limit below the boundary, by as much as the limits
// fall from one failure to the next, a sample for every sample of distance
// times its quadratic share; requiring the limits to differ by no more than
// their failures' distance over the limit's own (from the failure) keeps
// that error within a sample, which a size that ran cannot exceed. Two
// plans' failures lie on two lines and do not corroborate each other.
func corroborated(limits map[int]float64, from int) bool {
	e := limits[from]
	for other, o := range limits {
		if other == from {
			continue
		}
		reach := float64(max(from, other)) - min(e, o)
		if math.Abs(e-o)*reach <= math.Abs(float64(from-other)) {
			return true
		}
	}
	return false
}

// ranBetween reports whether a size above x and below y was seen to fit.
func (d *driver) ranBetween(x float64, y int) bool {
	for _, o := range d.trials {
		if fits(o) && float64(o.Size) > x && o.Size < y {
			return true
		}
	}
	return false
}

// noteRisk lowers the bracket's top to where the failures put sizes at
// risk (riskFromFailures), when that is below hi, the bracket's top now,
// rather than waiting for lo to pass the risk, which costs a trial above
// it; it says whether it did. The risk only ever moves down.
func (d *driver) noteRisk(hi int) bool {
	r, ok := d.riskFromFailures()
	if !ok || r.Size >= hi {
		return false
	}
	d.res.Risk = &r
	d.emit(Event{Kind: EventRisk, Risk: &r})
	return true
}

// top is the size the answer must lie below: the smallest flaky size, or
// the smallest at risk (noteRisk), whichever is less; g.Max+step when
// neither. skip is left out of the flaky ones.
func (d *driver) top(skip int) int {
	top := d.g.Max + d.g.Step
	for s := range d.flaky {
		if s != skip && s < top {
			top = s
		}
	}
	if r := d.res.Risk; r != nil && r.Size < top {
		top = r.Size
	}
	return top
}

// atRisk reports whether s is the size the failures put at risk: it
// bounds the answer without being run (its failure is the failures'
// figures' prediction, not a trial's).
func (d *driver) atRisk(s int) bool { return d.res.Risk != nil && d.res.Risk.Size == s }

// riskEdge plans the round after the failures put sizes from hi up at risk
// (noteRisk) while sizes at or above hi ran: those drew a plan that needs
// less, so the failures' plan is what the answer must fit, and it fits up
// to hi's neighbour below, by the failures' own figures. That size is
// probed first, the rest of the round spread below it, rather than the
// model's window, which only knows the sizes that ran and creeps up from
// the largest below hi, a size a round. Where trials side by side
// leave room (Config.ProofAlongside), the edge's second run, the proof's,
// rides along: hi is not run, so the edge's two runs are all the proof.
func (d *driver) riskEdge(lo, hi int) (sizes []int, predicted float64, rechecks []int, ok bool) {
	if !d.atRisk(hi) || !d.ranAtOrAbove(hi) {
		return nil, 0, nil, false
	}
	edge := hi - d.g.Step
	sizes = append(plan.Spread(d.g, lo, edge, d.k-1), edge)
	if okEdge, _ := d.tally(edge); d.cfg.ProofAlongside && !d.cfg.Unproven && d.cfg.SideBySide > len(sizes) && okEdge == 0 {
		rechecks = []int{edge}
	}
	return sizes, float64(edge), rechecks, true
}

// ranAtOrAbove reports whether a size from s up is believed to fit.
func (d *driver) ranAtOrAbove(s int) bool {
	for t, o := range d.belief {
		if t >= s && fits(o) {
			return true
		}
	}
	return false
}
