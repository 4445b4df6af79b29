package search

import (
	"context"
	"fmt"

	"github.com/batchfit/batchfit/internal/search/plan"
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
	// Rounds are the rounds those took (Result.Rounds), all of them the
	// proof's.
	Rounds int
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
	if err := checkAnswer(g, answer, firstFailure); err != nil {
		return Settled{}, fmt.Errorf("settle: %w", err)
	}
	cfg.MarginPercent = 0
	d := newDriver(cfg, p)
	d.settling = true
	d.planner = plan.NewSettle(answer, firstFailure, cfg.SideBySide)
	err := d.run(ctx)
	d.finish()
	if err != nil {
		return Settled{Trials: d.trials}, err
	}
	res := d.res
	return Settled{
		Max: res.Max, FirstFailure: res.FirstFailure,
		Agreed: res.Max == answer && res.FirstFailure == firstFailure && res.Exact(),
		Flaky:  res.Flaky, NonMonotonic: res.NonMonotonic, Trials: res.Trials, Rounds: res.Rounds,
	}, nil
}

// checkAnswer reports what keeps answer and firstFailure from being a
// search's proven answer on g: the answer a grid size, and its first
// failure the next one, or 0 when the answer is the top.
func checkAnswer(g plan.Grid, answer, firstFailure int) error {
	switch {
	case answer < g.Min || answer > g.Max || answer%g.Step != 0:
		return fmt.Errorf("answer %d is not a multiple of %d in [%d, %d]", answer, g.Step, g.Min, g.Max)
	case firstFailure == 0 && answer != g.Max:
		return fmt.Errorf("answer %d has no first failure, but the top is %d", answer, g.Max)
	case firstFailure != 0 && firstFailure != answer+g.Step:
		return fmt.Errorf("first failure %d is not the size after answer %d", firstFailure, answer)
	}
	return nil
}
