package plan

// marginPlanner looks for the largest size whose peak is within the margin
// limit. The limit is exact (no unseen overhead), so the window is the
// fit's prediction and its bound.
type marginPlanner struct{ misses int }

// NewMargin returns the margin's planner: its view's expected peak is the
// margin limit, and its bracket the margin's.
func NewMargin() Planner { return &marginPlanner{} }

func (m *marginPlanner) Next(v View) ([]int, float64) {
	if v.Fit == nil {
		return Spread(v.Grid, v.Lo, v.Hi, v.K), 0
	}
	sizes, hit, predicted, _ := windowPlan(v, m.misses)
	if hit {
		m.misses = 0
	} else {
		m.misses++
	}
	return sizes, predicted
}
