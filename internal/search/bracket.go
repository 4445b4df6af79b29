package search

import "github.com/batchfit/batchfit/internal/search/plan"

// bracket returns the largest size believed to fit below every flaky size
// (g.Min-step when none) and the smallest believed not to above it
// (g.Max+step when none): the highest boundary the trials have found
// below the first size that failed at random. A flaky size bounds the
// answer (the safe side: sizes above it likely fail at random too), but a
// failure below a size that ran, both holding when re-run (a conflict: a
// program that is not monotone, as near its limit fragmentation or a
// per-shape algorithm can make it), does not: a size seen to run twice
// runs, whatever failed below it, so the answer is the boundary above, as
// plain bisection's would be had its path passed there, and the conflict is
// reported.
func (d *driver) bracket() (lo, hi int) {
	return bracketOf(d.belief, d.g, d.top(-1), -1)
}

// bracketOf computes the bracket of beliefs below top, ignoring the size
// skip: top bounds it as a failure would.
func bracketOf(belief map[int]Observation, g plan.Grid, top, skip int) (lo, hi int) {
	lo, hi = g.Min-g.Step, min(top, g.Max+g.Step)
	for s, o := range belief {
		if s != skip && fits(o) && s > lo && s < top {
			lo = s
		}
	}
	for s, o := range belief {
		if s != skip && tooLarge(o) && s > lo && s < hi {
			hi = s
		}
	}
	return lo, hi
}

// believe makes o the belief at its size, unless the size is flaky: then
// it stays believed not to fit.
func (d *driver) believe(o Observation) {
	if d.flaky[o.Size] && fits(o) {
		return
	}
	d.belief[o.Size] = o
	delete(d.fromPrior, o.Size)
}

// markFlaky records that size s was seen both to fit and not to, and
// believes its failure.
func (d *driver) markFlaky(s int) {
	d.flaky[s] = true
	if fits(d.belief[s]) {
		for i := len(d.trials) - 1; i >= 0; i-- {
			if o := d.trials[i]; o.Size == s && tooLarge(o) {
				d.belief[s] = o
				return
			}
		}
	}
}

// tally counts the trials at size s that fitted and that did not.
func (d *driver) tally(s int) (ok, failed int) {
	for _, o := range d.trials {
		switch {
		case o.Size != s:
		case fits(o):
			ok++
		case tooLarge(o):
			failed++
		}
	}
	if ok == 0 {
		// Config.Prior: a failure there is one here, unless a trial here
		// fitted, which then decides.
		for _, o := range d.cfg.Prior {
			if o.Size == s && tooLarge(o) {
				failed++
			}
		}
	}
	return ok, failed
}

// recordConflict records the contradiction that the size s still makes
// with the nearest belief on the other side.
func (d *driver) recordConflict(s int) {
	o := d.belief[s]
	var c Conflict
	found := false
	for t, other := range d.belief {
		switch {
		case tooLarge(o) && fits(other) && t >= s && (!found || t < c.Ok.Size):
			c, found = Conflict{Ok: other, Fail: o}, true
		case fits(o) && tooLarge(other) && t <= s && (!found || t > c.Fail.Size):
			c, found = Conflict{Ok: o, Fail: other}, true
		}
	}
	if !found {
		return
	}
	for _, e := range d.res.NonMonotonic {
		if e.Ok.Size == c.Ok.Size && e.Fail.Size == c.Fail.Size {
			return
		}
	}
	d.res.NonMonotonic = append(d.res.NonMonotonic, c)
	d.emit(Event{Kind: EventConflict, Conflict: c})
}
