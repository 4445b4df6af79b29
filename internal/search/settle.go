package search

import (
	"context"
	"fmt"
	"slices"
)

// Settled is a search's answer as fresh trials see it.
type Settled struct {
	// Max is the largest size seen to fit in fresh trials whose next grid
	// size was seen not to (FirstFailure; 0 when Max is the top of the
	// grid), each as often as Run's proof asks.
	Max, FirstFailure int
	// Agreed is set when fresh trials confirmed the answer and its first
	// failure as they were, and the boundary reproduced; otherwise it
	// moved, or it is flaky.
	Agreed bool
	// Flaky and NonMonotonic are as in Result: where fresh trials
	// disagreed, Max is the safe side and not exact; where a failure held
	// below a size that ran, Max is the boundary above it.
	Flaky        []FlakySize
	NonMonotonic []Conflict
	Trials       []Observation // every fresh observation, in order
}

// Settle makes an answer found in warm processes exact for fresh ones. A
// warm worker can fit a size or two more than a fresh process (whose
// optimizer state is made amid the first step's cached blocks), or less,
// so its answer is reported only through this.
//
// It searches as Run does, with Run's rules for results that disagree and
// for the proof (Confirm included), but in fresh trials only (every Probe
// call's Request is Fresh), and starting from the warm answer: it runs
// answer and firstFailure (0 when answer is the top of cfg's grid), as Run
// returned them, in one round (firstFailure twice when three trials may run
// side by side: the proof's repeat). Where a fresh trial disagrees, it gallops
// away from the warm answer on cfg's grid (one step, then 2, 4 ...), then
// bisects, until a fresh success sits next to a fresh failure. The rounds
// are reported through cfg.OnEvent in PhaseConfirm. A margin is not
// settled.
//
// With every error it returns the fresh trials so far and no answer: a
// *NothingFitsError when even the grid's smallest size does not fit
// fresh, a *CrashError when a trial crashed, and the cause, wrapped, when
// the context or the Prober ended it.
func Settle(ctx context.Context, cfg Config, p Prober, answer, firstFailure int) (Settled, error) {
	if err := cfg.Validate(); err != nil {
		return Settled{}, fmt.Errorf("invalid search: %w", err)
	}
	g := cfg.grid()
	if err := g.checkAnswer(answer, firstFailure); err != nil {
		return Settled{}, fmt.Errorf("settle: %w", err)
	}
	cfg.MarginPercent = 0
	d := newDriver(cfg, p)
	d.settling = true
	d.plan = &settlePlanner{answer: answer, first: firstFailure, sideBySide: cfg.SideBySide}
	err := d.run(ctx)
	d.finish()
	if err != nil {
		return Settled{Trials: d.trials}, err
	}
	res := d.res
	return Settled{
		Max: res.Max, FirstFailure: res.FirstFailure,
		Agreed: res.Max == answer && res.FirstFailure == firstFailure && res.Exact(),
		Flaky:  res.Flaky, NonMonotonic: res.NonMonotonic, Trials: res.Trials,
	}, nil
}

// settlePlanner plans Settle's rounds: the warm answer and its first
// failure, then a gallop away from them in the direction fresh trials
// showed, then bisection.
type settlePlanner struct{ answer, first, sideBySide int }

func (s *settlePlanner) next(v view) ([]int, float64) {
	switch {
	case !v.seenOK() && v.growing():
		sizes := []int{s.answer}
		if s.first > 0 {
			// Side by side, the proof's repeated failure joins the round.
			sizes = append(sizes, slices.Repeat([]int{s.first}, min(max(s.sideBySide-1, 1), 2))...)
		}
		return sizes, 0
	case !v.seenOK():
		return gallopDown(v, s.answer), 0
	case v.growing():
		return gallopUp(v, s.first), 0
	}
	return spread(v.g, v.lo, v.hi, v.k), 0
}

// gallopDown returns up to k sizes below the smallest failure, each twice
// as far below from as the last: the next after one step, 2, 4 ... down to
// the grid's smallest.
func gallopDown(v view, from int) []int {
	g := v.g
	var sizes []int
	for d := max(g.step, 2*(from-v.hi)); len(sizes) < v.k; d *= 2 {
		s := max(from-d, g.min)
		if s < v.hi && s > v.lo {
			sizes = append(sizes, s)
		}
		if s == g.min {
			break
		}
	}
	return sizes
}

// gallopUp is gallopDown upwards, above the largest success, up to the
// grid's top.
func gallopUp(v view, from int) []int {
	g := v.g
	var sizes []int
	for d := max(g.step, 2*(v.lo-from)); len(sizes) < v.k; d *= 2 {
		s := min(from+d, g.max)
		if s > v.lo && s < v.hi {
			sizes = append(sizes, s)
		}
		if s == g.max {
			break
		}
	}
	return sizes
}

// checkAnswer reports what keeps answer and firstFailure from being a
// search's proven answer on g: the answer a grid size, and its first
// failure the next one, or 0 when the answer is the top.
func (g grid) checkAnswer(answer, firstFailure int) error {
	switch {
	case answer < g.min || answer > g.max || answer%g.step != 0:
		return fmt.Errorf("answer %d is not a multiple of %d in [%d, %d]", answer, g.step, g.min, g.max)
	case firstFailure == 0 && answer != g.max:
		return fmt.Errorf("answer %d has no first failure, but the top is %d", answer, g.max)
	case firstFailure != 0 && firstFailure != answer+g.step:
		return fmt.Errorf("first failure %d is not the size after answer %d", firstFailure, answer)
	}
	return nil
}
