package search

import "math"

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
// Memory.Limit reported), with the bracket closed on hi. There an OOM is
// the step's planned buffer not fitting in what the pool had free (the
// parameters and optimizer state are held apart), and that buffer is the
// step's activations, in proportion to the batch: on the H200 JAX's GPT
// asked its 23.90 GiB pool, 23.64 GiB free, for 23.83 GiB at 677 (35.2 MiB
// a sample), 23.91 at 679 and 24.22 at 688. But XLA plans a size
// differently from one process to the next (677 ran once and failed twice;
// 689 and 693 ran where 694 asked 24.08 GiB): a plan that needs more stops
// fitting lower, and sizes above run only when another plan is drawn (676
// ran twice; the truth's repeats saw sizes fail from 672 up). A failure
// says where its own plan stops fitting: at from × free / request, where
// the buffer scaled down to a smaller batch fits what was free (a buffer
// with a part that does not grow would fit a little lower). It is taken
// from the smallest flaky size, a plan that did not fit where another did;
// else from hi, when it missed by more than midStepSamples samples, which
// a size next to one that ran does only when that one drew another plan.
// Slopes between failures are no guide: failures of several plans lie on
// several lines (session 15's third search: pairs with 677's failure gave
// 15.8 to 42.9 MB a sample).
func (d *driver) riskFromFailures(hi int) (Risk, bool) {
	if _, pooled := d.capacity(); !pooled {
		return Risk{}, false
	}
	last := map[int]Failure{}
	for _, o := range d.trials {
		// A request that is most of what the trial needed is a step's
		// planned buffer; one that is not (an allocator's single tensor:
		// torch's, TensorFlow's without XLA) says nothing of a plan.
		if f := o.Failure; tooLarge(o) && f.Request > f.Free && f.Free > 0 && f.Request > f.Allocated {
			last[o.Size] = f
		}
	}
	from := 0
	for s := range d.flaky {
		if _, ok := last[s]; ok && (from == 0 || s < from) {
			from = s
		}
	}
	flaky := from != 0
	if _, ok := last[hi]; !flaky && ok {
		from = hi
	}
	if from == 0 {
		return Risk{}, false
	}
	f := last[from]
	slope := float64(f.Request) / float64(from)
	short := float64(f.Request - f.Free)
	if !flaky && short <= midStepSamples*slope {
		return Risk{}, false
	}
	safe := d.g.floor(toInt(math.Floor(float64(from)*float64(f.Free)/float64(f.Request)), d.g))
	if safe < d.g.min {
		return Risk{}, false
	}
	return Risk{Size: safe + d.g.step, From: from, Shortfall: short, Slope: slope}, true
}

// noteRisk lowers the bracket's top to where the failures put sizes at
// risk (riskFromFailures), once the bracket closed on (lo, hi) above it;
// it says whether it did. The risk only ever moves down.
func (d *driver) noteRisk(lo, hi int) bool {
	r, ok := d.riskFromFailures(hi)
	if !ok || r.Size > lo || (d.res.Risk != nil && r.Size >= d.res.Risk.Size) {
		return false
	}
	d.res.Risk = &r
	d.emit(Event{Kind: EventRisk, Risk: &r})
	return true
}

// top is the size the answer must lie below: the smallest flaky size, or
// the smallest at risk (noteRisk), whichever is less; g.max+step when
// neither. skip is left out of the flaky ones.
func (d *driver) top(skip int) int {
	top := d.g.max + d.g.step
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
// the largest below hi (session 15's fourth search: 661, 666, 669, 670,
// 671 after 684 put 672 at risk with 683 run).
func (d *driver) riskEdge(lo, hi int) (sizes []int, predicted float64, ok bool) {
	if !d.atRisk(hi) || !d.ranAtOrAbove(hi) {
		return nil, 0, false
	}
	edge := hi - d.g.step
	return append(spread(d.g, lo, edge, d.k-1), edge), float64(edge), true
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
