package search

import "math"

// planner chooses the next sizes to probe. Every size it returns lies
// strictly inside the open bracket (v.lo, v.hi), so no settled size is ever
// run twice; there is always at least one such size when it is called.
type planner interface {
	next(v view) (sizes []int, predicted float64)
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

// toInt converts a predicted size to an int just outside the grid's range
// at most, so that wild predictions cannot overflow.
func toInt(x float64, g grid) int {
	lo, hi := float64(g.min-2*g.step), float64(g.max+2*g.step)
	return int(math.Floor(min(max(x, lo), hi)))
}
