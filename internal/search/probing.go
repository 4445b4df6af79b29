package search

import (
	"context"
	"fmt"
	"slices"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/search/plan"
)

// probing makes a search's Probe calls: it marks the fresh ones, holds the
// Prober to its contract, keeps every observation in order and reports
// each step through OnEvent. Run and Settle both search through it, so
// that their trials are checked and shown the same way.
type probing struct {
	p       Prober
	g       plan.Grid
	onEvent func(Event)
	// settling makes every round fresh and reports it in PhaseConfirm:
	// Settle searches in fresh trials only, as a confirmation.
	settling bool

	// width is how many trials run at once (Config.Parallel, or
	// SideBySide where more): a Probe call of more sizes runs them in
	// turns, a round each.
	width int

	trials []Observation // every observation, in order
	rounds int           // rounds: each Probe call's turns of width trials
	// proofRounds are the rounds that only proved a closed bracket: the
	// proof pair's re-checks and confirmations, and every round of Settle.
	proofRounds int

	phase          Phase
	lastLo, lastHi int
}

// probe runs one Probe call and records its observations. It turns crashes,
// cancellations and Prober misbehaviour into errors.
func (pr *probing) probe(ctx context.Context, phase Phase, sizes []int, predicted float64, fresh bool) ([]Observation, error) {
	return pr.probeWith(ctx, phase, sizes, predicted, fresh, 0)
}

// probeWith is probe with the last rechecks of sizes marked as re-runs
// (Observation.Retry): the proof's re-checks that ride along a round.
func (pr *probing) probeWith(ctx context.Context, phase Phase, sizes []int, predicted float64, fresh bool, rechecks int) ([]Observation, error) {
	if pr.settling {
		phase, fresh = PhaseConfirm, true
	}
	pr.notePhase(phase)
	turns := (len(sizes) + max(pr.width, 1) - 1) / max(pr.width, 1)
	pr.emit(Event{Kind: EventPlan, Sizes: slices.Clone(sizes), Predicted: predicted, Rounds: turns})
	pr.rounds += turns
	obs, err := pr.p.Probe(ctx, Request{Sizes: slices.Clone(sizes), Fresh: fresh, Rechecks: rechecks})
	if err != nil {
		return nil, fmt.Errorf("probe batch sizes %v: %w", sizes, err)
	}
	if len(obs) != len(sizes) {
		return nil, fmt.Errorf("probe batch sizes %v: prober returned %d observations", sizes, len(obs))
	}
	for i := range obs {
		if obs[i].Size == 0 {
			obs[i].Size = sizes[i]
		}
		if obs[i].Size != sizes[i] {
			return nil, fmt.Errorf("probe batch sizes %v: observation %d is for batch size %d", sizes, i, obs[i].Size)
		}
		if !obs[i].Outcome.Valid() {
			return nil, fmt.Errorf("probe batch size %d: unknown outcome %q", sizes[i], obs[i].Outcome)
		}
		obs[i].Retry = fresh || i >= len(sizes)-rechecks
	}
	// Record the whole round before acting on any of it, so the trials
	// that ran beside a crash are not lost.
	for _, o := range obs {
		pr.trials = append(pr.trials, o)
		pr.emit(Event{Kind: EventObservation, Observation: o})
	}
	for _, o := range obs {
		switch o.Outcome {
		case classify.Crash:
			return nil, &CrashError{Observation: o}
		case classify.Canceled:
			cause := ctx.Err()
			if cause == nil {
				cause = context.Canceled
			}
			return nil, fmt.Errorf("trial at batch size %d: %w", o.Size, cause)
		}
	}
	return obs, nil
}

func (pr *probing) emit(e Event) {
	if pr.onEvent == nil {
		return
	}
	e.Phase = pr.phase
	e.Lo, e.Hi = pr.lastLo, pr.lastHi
	pr.onEvent(e)
}

func (pr *probing) notePhase(p Phase) {
	if p != pr.phase {
		pr.phase = p
		pr.emit(Event{Kind: EventPhase})
	}
}

// noteBracket reports the bracket, with 0 for an unknown side.
func (pr *probing) noteBracket(lo, hi int) {
	if lo < pr.g.Min {
		lo = 0
	}
	if hi > pr.g.Max {
		hi = 0
	}
	if lo != pr.lastLo || hi != pr.lastHi {
		pr.lastLo, pr.lastHi = lo, hi
		pr.emit(Event{Kind: EventBracket})
	}
}
