package search

import (
	"math"
	"slices"
)

// Risk says where a boundary's failures put sizes at risk: by what they
// asked for and what was free, sizes from Size up can fail as they did,
// however often some of them ran.
type Risk struct {
	Size int // the smallest size at risk; the safe side is the one below
	// From is the size whose failure missed by Shortfall bytes, and Slope
	// how much more the failures asked for a sample, in bytes.
	From             int
	Shortfall, Slope float64
}

// riskFromFailures returns where the failures put sizes at risk, for a
// workload whose framework plans a step's memory in its own pool (XLA's:
// Memory.Limit reported), with the bracket closed on (lo, hi). There an
// OOM is the step's planned buffer not fitting in what the pool had free,
// and that buffer grows steadily with the batch (JAX's GPT on the H200:
// 23.83 GiB asked at 677, 23.91 at 679, 24.22 at 688, 24.86 at 706, with
// 23.64 GiB free each time). But XLA can plan one size two ways (677 ran
// with 23.77 GiB after rematerialisation, and failed with 24.73): the plan
// that needs more stops fitting lower, and sizes between run only when the
// other plan is drawn (676 ran twice; the truth's repeats saw sizes fail
// from 672 up). A failure says where its plan stops fitting: hi less its
// shortfall over the growth. It is taken from the smallest flaky size, a
// plan that did not fit where another did; else from hi, when it missed
// by more than midStepSamples samples, which a size next to one that ran
// does only when that one drew the other plan. The growth is the slope
// the failures' requests agree on with from's (requestSlope), so that
// failures of the other plan among them do not tilt it; the peaks of the
// sizes that ran flatten near the pool as XLA rematerialises, and do not
// say it.
func (d *driver) riskFromFailures(hi int) (Risk, bool) {
	if _, pooled := d.capacity(); !pooled {
		return Risk{}, false
	}
	last := map[int]Failure{}
	for _, o := range d.trials {
		if f := o.Failure; tooLarge(o) && f.Request > f.Free && f.Free > 0 {
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
	slope, ok := requestSlope(last, from)
	if !ok {
		return Risk{}, false
	}
	short := float64(last[from].Request - last[from].Free)
	if !flaky && short <= midStepSamples*slope {
		return Risk{}, false
	}
	safe := d.g.floor(toInt(math.Floor(float64(from)-short/slope), d.g))
	if safe < d.g.min {
		return Risk{}, false
	}
	return Risk{Size: safe + d.g.step, From: from, Shortfall: short, Slope: slope}, true
}

// requestSlope is how much more the failures asked for a sample, in bytes,
// on the plan of the failure at from: the slope that most of the pairs
// (from, another failing size) agree on, within slopeAgreement, when two
// pairs at least do and no other group is as large (the group's median,
// the lower of two: a smaller slope puts the risk lower). Failures of two
// plans (XLA's) lie on two parallel lines: a pair within from's plan gives
// its slope, a pair across the plans anything (session 15's second JAX
// search failed at 677, 678 and 681 on one plan and at 700 on the other:
// pairs of any two agreed as often on 20.5 MB a sample as on 40.3, pairs
// with 677 on 40.3 twice, on 21.4 once).
func requestSlope(failures map[int]Failure, from int) (float64, bool) {
	var slopes []float64
	for s, f := range failures {
		if s != from {
			slopes = append(slopes, (float64(f.Request)-float64(failures[from].Request))/float64(s-from))
		}
	}
	slices.Sort(slopes)
	var best []float64
	tie := false
	for _, m := range slopes {
		if m <= 0 {
			continue
		}
		var group []float64
		for _, o := range slopes {
			if math.Abs(o-m) <= slopeAgreement*m {
				group = append(group, o)
			}
		}
		switch {
		case len(group) > len(best):
			best, tie = group, false
		case len(group) == len(best) && !slices.Equal(group, best) && !overlaps(group, best):
			tie = true
		}
	}
	if len(best) < 2 || tie {
		return 0, false
	}
	return best[(len(best)-1)/2], true
}

// overlaps reports whether two sorted groups of slopes share one.
func overlaps(a, b []float64) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// slopeAgreement is how near, as a fraction, two pairs' slopes must be to
// agree: XLA's requests at 677, 679, 688 and 706 on the H200 gave pairs
// with 677 within 12 % of their median, and pairs across two plans are off
// by far more.
const slopeAgreement = 0.15

// noteRisk lowers the bracket's top to where the failures put sizes at
// risk (riskFromFailures), once the bracket closed on (lo, hi) above it;
// it says whether it did. The risk only ever moves down.
func (d *driver) noteRisk(lo, hi int) bool {
	r, ok := d.riskFromFailures(hi)
	if !ok || r.Size > lo || (d.res.Risk != nil && r.Size >= d.res.Risk.Size) {
		return false
	}
	d.res.Risk = &r
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
