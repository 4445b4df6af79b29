// Package plan chooses the batch sizes a search tries next. A Planner is a
// pure function of a View, what the search knows so far (its bracket on the
// Grid, the measured peaks and the Fit of peak memory against batch size
// made from them, what the failure at its top said), and never runs,
// believes or proves anything itself: that is the search's driver.
package plan

import "math"

// Planner chooses the next sizes to probe. Every size it returns lies
// strictly inside the open bracket (v.Lo, v.Hi), so no settled size is ever
// run twice; there is always at least one such size when it is called.
// predicted is the model's predicted boundary (a real batch size) when it
// planned the sizes, 0 when it did not.
type Planner interface {
	Next(v View) (sizes []int, predicted float64)
}

// bisectPlanner grows ×2 from the start until a size fails or the top of
// the range runs, then splits the bracket into k+1 parts per round.
type bisectPlanner struct{ start int }

// NewBisect returns the planner that grows ×2 from start until a size
// fails or the top of the range runs, then bisects (k-ary with K > 1).
func NewBisect(start int) Planner { return &bisectPlanner{start: start} }

func (b *bisectPlanner) Next(v View) ([]int, float64) {
	return bisectStep(v, b.start), 0
}

func bisectStep(v View, start int) []int {
	if !v.Growing() {
		return Spread(v.Grid, v.Lo, v.Hi, v.K)
	}
	from := start
	if v.SeenOK() {
		from = 2 * v.Lo
	}
	return grow(v.Grid, from, v.K)
}

// grow returns k sizes doubling from `from`, the last clamped to the top.
func grow(g Grid, from, k int) []int {
	var sizes []int
	for s := from; len(sizes) < k; s *= 2 {
		sizes = append(sizes, g.Clamp(g.Floor(s)))
		if s >= g.Max {
			break
		}
	}
	return sizes
}

// Spread returns up to k grid sizes strictly between x and y, evenly
// spaced: all of them when there are no more than k, else the k that cut
// the interval into k+1 near-equal parts (the middle one when k is 1).
func Spread(g Grid, x, y, k int) []int {
	m := (y - x) / g.Step // parts of one step between x and y
	if m <= 1 {
		return nil
	}
	var sizes []int
	if m-1 <= k {
		for s := x + g.Step; s < y; s += g.Step {
			sizes = append(sizes, s)
		}
		return sizes
	}
	for i := 1; i <= k; i++ {
		sizes = append(sizes, x+i*m/(k+1)*g.Step)
	}
	return sizes
}

// ToInt converts a predicted size to an int just outside the grid's range
// at most, so that wild predictions cannot overflow.
func ToInt(x float64, g Grid) int {
	lo, hi := float64(g.Min-2*g.Step), float64(g.Max+2*g.Step)
	return int(math.Floor(min(max(x, lo), hi)))
}
