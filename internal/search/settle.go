package search

import (
	"context"
	"fmt"
)

// Settled is a search's answer as fresh trials see it.
type Settled struct {
	// Max is the largest size seen to fit in a fresh trial whose next grid
	// size was seen not to in one (FirstFailure; 0 when Max is the top of
	// the grid).
	Max, FirstFailure int
	// Agreed is set when fresh trials confirmed the answer and its first
	// failure as they were; otherwise the boundary moved.
	Agreed bool
	Trials []Observation // every fresh observation, in order
}

// Settle makes an answer found in warm processes exact for fresh ones. A
// warm worker can fit a size or two more than a fresh process (whose
// optimizer state is made amid the first step's cached blocks), or less,
// so its answer is reported only through this.
//
// It runs answer and firstFailure (0 when answer is the top of cfg's
// grid), as Run returned them, in one round of fresh trials
// (Fresh(ctx) is true for every Probe call). Where a fresh trial
// disagrees, it moves the boundary with fresh trials alone: it gallops
// away from the warm answer on cfg's grid (one step, then 2, 4 ...), then
// bisects, until a fresh success sits next to a fresh failure. The rounds
// are reported through cfg.OnEvent in PhaseConfirm.
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
	pr := &probing{p: p, g: g, onEvent: cfg.OnEvent}
	st, err := settle(ctx, pr, answer, firstFailure)
	st.Trials = pr.trials
	return st, err
}

// settle is Settle on a checked answer. lo and hi are the bracket as in
// Run: the largest size seen to fit fresh (g.min-step: none yet) and the
// smallest seen not to (g.max+step: none yet).
func settle(ctx context.Context, pr *probing, answer, firstFailure int) (Settled, error) {
	g := pr.g
	lo, hi := answer, g.max+g.step
	sizes := []int{answer}
	if firstFailure > 0 {
		hi = firstFailure
		sizes = append(sizes, firstFailure)
	}
	pr.noteBracket(lo, hi)
	obs, err := pr.fresh(ctx, sizes...)
	if err != nil {
		return Settled{}, err
	}
	switch {
	case !fits(obs[0]):
		// Down: the warm answer does not fit fresh. What its first failure
		// did fresh cannot matter: it is above a failure.
		lo, hi = g.min-g.step, answer
		failed := obs[0]
		for d := g.step; ; d *= 2 {
			pr.noteBracket(lo, hi)
			if hi == g.min {
				return Settled{}, &NothingFitsError{Observation: failed}
			}
			s := max(answer-d, g.min)
			o, err := pr.fresh(ctx, s)
			if err != nil {
				return Settled{}, err
			}
			if fits(o[0]) {
				lo = s
				break
			}
			hi, failed = s, o[0]
		}
	case firstFailure > 0 && fits(obs[1]):
		// Up: the warm first failure fits fresh.
		lo, hi = firstFailure, g.max+g.step
		for d := g.step; lo < g.max; d *= 2 {
			pr.noteBracket(lo, hi)
			s := min(firstFailure+d, g.max)
			o, err := pr.fresh(ctx, s)
			if err != nil {
				return Settled{}, err
			}
			if !fits(o[0]) {
				hi = s
				break
			}
			lo = s
		}
	default:
		return Settled{Max: answer, FirstFailure: firstFailure, Agreed: true}, nil
	}
	// lo and hi are on the grid, so the middle of two steps or more lies
	// strictly between them.
	for hi <= g.max && hi-lo > g.step {
		pr.noteBracket(lo, hi)
		mid := g.floor((lo + hi) / 2)
		o, err := pr.fresh(ctx, mid)
		if err != nil {
			return Settled{}, err
		}
		if fits(o[0]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	pr.noteBracket(lo, hi)
	st := Settled{Max: lo}
	if hi <= g.max {
		st.FirstFailure = hi
	}
	return st, nil
}

// fresh runs one round of settling: sizes in fresh trials, in
// PhaseConfirm.
func (pr *probing) fresh(ctx context.Context, sizes ...int) ([]Observation, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("settle stopped: %w", err)
	}
	return pr.probe(ctx, PhaseConfirm, sizes, 0, true)
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
