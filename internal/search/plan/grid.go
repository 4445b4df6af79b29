package plan

// Grid is the set of sizes a search may try: multiples of Step in
// [Min, Max].
type Grid struct{ Min, Max, Step int }

// Floor returns the largest grid size at or below x (which may be outside
// the range).
func (g Grid) Floor(x int) int {
	if x >= 0 {
		return x / g.Step * g.Step
	}
	return -((-x + g.Step - 1) / g.Step * g.Step)
}

// Ceil returns the smallest grid size at or above x.
func (g Grid) Ceil(x int) int { return g.Floor(x + g.Step - 1) }

// Clamp puts a grid size into [Min, Max].
func (g Grid) Clamp(x int) int { return min(max(x, g.Min), g.Max) }
