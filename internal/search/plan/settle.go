package plan

import "slices"

// settlePlanner plans Settle's rounds: the warm answer and its first
// failure, then a gallop away from them in the direction fresh trials
// showed, then bisection.
type settlePlanner struct {
	answer, first, sideBySide int
	opened                    bool // the first round, the answer and its first failure, was planned
}

// NewSettle returns the planner of the search's Settle, for a warm answer
// and its first failure (0 when answer is the grid's top), with sideBySide
// trials at once.
func NewSettle(answer, first, sideBySide int) Planner {
	return &settlePlanner{answer: answer, first: first, sideBySide: sideBySide}
}

func (s *settlePlanner) Next(v View) ([]int, float64) {
	switch {
	case !s.opened:
		s.opened = true
		sizes := []int{s.answer}
		if s.first > 0 {
			// Side by side, the proof's repeated failure joins the round.
			sizes = append(sizes, slices.Repeat([]int{s.first}, min(max(s.sideBySide-1, 1), 2))...)
		}
		return sizes, 0
	case !v.SeenOK():
		return gallopDown(v, s.answer), 0
	case v.Growing():
		return gallopUp(v, s.first), 0
	}
	return Spread(v.Grid, v.Lo, v.Hi, v.K), 0
}

// gallopDown returns up to k sizes below the smallest failure, each twice
// as far below from as the last: the next after one step, 2, 4 ... down to
// the grid's smallest.
func gallopDown(v View, from int) []int {
	g := v.Grid
	var sizes []int
	for d := max(g.Step, 2*(from-v.Hi)); len(sizes) < v.K; d *= 2 {
		s := max(from-d, g.Min)
		if s < v.Hi && s > v.Lo {
			sizes = append(sizes, s)
		}
		if s == g.Min {
			break
		}
	}
	return sizes
}

// gallopUp is gallopDown upwards, above the largest success, up to the
// grid's top.
func gallopUp(v View, from int) []int {
	g := v.Grid
	var sizes []int
	for d := max(g.Step, 2*(v.Lo-from)); len(sizes) < v.K; d *= 2 {
		s := min(from+d, g.Max)
		if s > v.Lo && s < v.Hi {
			sizes = append(sizes, s)
		}
		if s == g.Max {
			break
		}
	}
	return sizes
}
