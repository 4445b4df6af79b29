package plan

import "slices"

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

func (gl *gallop) hold(v View, sizes []int) []int {
	from, gap := gl.from, gl.gap
	gl.from, gl.gap = v.Lo, v.PeakLo-peakAt(v, v.Lo)
	if from <= 0 || v.Lo <= from || gl.gap <= gap/2 {
		gl.streak = 0
		return sizes
	}
	gl.advance = v.Lo - from
	if gl.streak++; gl.streak < 2 || len(sizes) == 0 {
		return sizes
	}
	least := v.Grid.Clamp(v.Grid.Floor(v.Lo + 2*gl.advance))
	if top := slices.Max(sizes); top < least {
		sizes[slices.Index(sizes, top)] = least
	}
	return sizes
}

// peakAt is the measured peak at size s, 0 when s did not run.
func peakAt(v View, s int) float64 {
	for _, p := range v.Points {
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
// point from one side, each move a fraction of the last, does not creep.
// After refineSlack creeping rounds in a row (one, once the guard has had
// to act), the next round reaches further from the side the last one moved:
// twice as far as that one moved it, or as the guard's last step, whichever
// is more, but no further than the middle. The steps double until they
// bisect, so however the model errs the bracket closes in a small multiple
// of bisection's rounds, and a model that is right is never moved.
type refineGuard struct {
	lo, hi  int  // the bracket the last round was planned in
	planned bool // whether lo, hi hold one
	streak  int  // rounds in a row that did not narrow the bracket
	step    int  // the guard's last step; 0 before it acted
	move    int  // how far the last round moved the bracket's ends
}

// refineSlack is how many rounds in a row the model may creep before the
// guard first acts: three, as a model that reads failures' figures may
// step twice on one side before they place the boundary, and moving the
// third round then costs a trial.
const refineSlack = 3

func (r *refineGuard) hold(v View, sizes []int) []int {
	lo, hi, planned := r.lo, r.hi, r.planned
	r.lo, r.hi, r.planned = v.Lo, v.Hi, true
	if !planned || len(sizes) == 0 {
		return sizes
	}
	move := (v.Lo - lo) + (hi - v.Hi)
	lastMove := r.move
	r.move = move
	if (v.Hi-v.Lo)*(v.K+1) <= hi-lo+v.K*v.Grid.Step || 2*move <= lastMove {
		r.streak = 0
		return sizes
	}
	r.streak++
	if r.streak < refineSlack && r.step == 0 {
		return sizes
	}
	r.streak = 0
	if v.Lo > lo {
		r.step = max(2*r.step, 2*(v.Lo-lo))
		least := min(v.Grid.Floor(v.Lo+r.step), v.Grid.Floor(v.Lo+(v.Hi-v.Lo)/2))
		if top := slices.Max(sizes); top < least {
			sizes[slices.Index(sizes, top)] = least
		}
		return sizes
	}
	r.step = max(2*r.step, 2*(hi-v.Hi))
	most := max(v.Grid.Ceil(v.Hi-r.step), v.Grid.Ceil(v.Hi-(v.Hi-v.Lo)/2))
	if bottom := slices.Min(sizes); bottom > most {
		sizes[slices.Index(sizes, bottom)] = most
	}
	return sizes
}
