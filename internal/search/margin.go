package search

import "github.com/batchfit/batchfit/internal/search/plan"

// marginLimit is the peak, in units of the memory figure, that leaves
// MarginPercent of the capacity free.
func (d *driver) marginLimit() float64 {
	capacity, _ := d.capacity()
	return float64(capacity) * (1 - d.cfg.MarginPercent/100)
}

// marginBracket returns the margin's bracket: mlo, the largest size below
// mhi whose measured peak is within the limit (g.Min-step when none), and
// mhi, the smallest size that does not fit or whose peak is above it. ok is
// false when no margin was asked for or it cannot be measured.
func (d *driver) marginBracket() (mlo, mhi int, ok bool) {
	if d.cfg.MarginPercent <= 0 {
		return 0, 0, false
	}
	_, hi := d.bracket()
	fig, _ := d.points(hi)
	if fig == FigureNone {
		return 0, 0, false
	}
	limit := d.marginLimit()
	mhi = hi
	for s, o := range d.belief {
		// A size that failed below the answer (a conflict that held)
		// bounds the margin too: a size with room to spare must not lie
		// above one that does not run.
		over := fits(o) && float64(fig.of(o.Memory)) > limit
		if s < mhi && (over || tooLarge(o)) {
			mhi = s
		}
	}
	mlo = d.g.Min - d.g.Step
	for s, o := range d.belief {
		if fits(o) && s < mhi && s > mlo {
			mlo = s
		}
	}
	return mlo, mhi, true
}

// marginView shows the margin planner its bracket, with the margin limit
// as the expected peak.
func (d *driver) marginView(mlo, mhi int) plan.View {
	// Fit on every size that ran: the peaks above the limit help place it.
	v := d.view(d.bracket())
	v.Lo, v.Hi = mlo, mhi
	v.PeakLo, v.PeakHi = d.marginLimit(), d.marginLimit()
	return v
}
