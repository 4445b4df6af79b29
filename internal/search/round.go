package search

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/batchfit/batchfit/internal/search/plan"
)

// round probes sizes as new trials, then re-checks any result that
// contradicts the others and settles what to believe.
func (d *driver) round(ctx context.Context, phase Phase, sizes []int, predicted float64) error {
	return d.roundWith(ctx, phase, sizes, predicted, nil)
}

// roundWith is round with the proof's rechecks (proofAlongside) run in the
// same Probe call. They are only tallied, as the proof's re-checks are:
// where one disagrees with the new trial at its size, or with what was
// believed of a size the round did not plan (lo, hi), the size is flaky.
func (d *driver) roundWith(ctx context.Context, phase Phase, sizes []int, predicted float64, rechecks []int) error {
	if len(sizes) == 0 {
		// A planner bug must not spin forever.
		return fmt.Errorf("search planner proposed no size inside the bracket")
	}
	clear := d.clearRoom()
	all, err := d.probeWith(ctx, phase, slices.Concat(sizes, rechecks), predicted, false, len(rechecks))
	if err != nil {
		return err
	}
	obs, riders := all[:len(sizes)], all[len(sizes):]
	d.markDisagreeing(obs, riders)
	// A result contradicts when it disagrees with the bracket built from
	// everything else known, this round's other results included. A
	// failure the model did not expect is suspect too when it would move
	// the boundary down.
	trial := maps.Clone(d.belief)
	for _, o := range obs {
		trial[o.Size] = o
	}
	var suspects []Observation
	for _, o := range obs {
		lo, hi := bracketOf(trial, d.g, d.top(o.Size), o.Size)
		contradicts := (tooLarge(o) && o.Size <= lo) || (fits(o) && o.Size >= hi)
		surprise := tooLarge(o) && o.Size < hi && o.Size <= clear
		if contradicts || surprise {
			suspects = append(suspects, o)
			continue
		}
		d.believe(o)
	}
	if len(suspects) == 0 {
		return nil
	}
	again, err := d.rerunSuspects(ctx, suspects, riders)
	if err != nil {
		return err
	}
	var held []int
	for i, o := range suspects {
		// Believe the re-run: if it disagrees, the first result was the
		// flake; if it agrees, both say the same and it stands.
		d.believe(again[i])
		if !agree(o, again[i]) {
			continue
		}
		held = append(held, o.Size)
		if tooLarge(o) && o.Size <= clear {
			d.modelDoubted = true
		}
	}
	for _, s := range held {
		d.recordConflict(s)
	}
	return nil
}

// markDisagreeing marks flaky the sizes that a re-check riding along the
// round (riders) saw otherwise than this round's own result there, or
// than what was believed of it before.
func (d *driver) markDisagreeing(obs, riders []Observation) {
	for _, r := range riders {
		o, known := d.belief[r.Size]
		if i := slices.IndexFunc(obs, func(o Observation) bool { return o.Size == r.Size }); i >= 0 {
			o, known = obs[i], true
		}
		if known && !agree(o, r) {
			d.markFlaky(r.Size)
		}
	}
}

// rerunSuspects returns each suspect's second result, in order: a suspect
// that a re-check beside the round (proofAlongside) ran again has had its
// re-run; the others run again now, as many at once as run side by side,
// and beside them, where that leaves room, the proof's re-checks of the
// pair the bracket closes on if every re-run agrees (besideReruns).
func (d *driver) rerunSuspects(ctx context.Context, suspects, riders []Observation) ([]Observation, error) {
	again := make([]Observation, len(suspects))
	var recheck, pending []int
	for i, o := range suspects {
		if j := slices.IndexFunc(riders, func(r Observation) bool { return r.Size == o.Size }); j >= 0 {
			again[i] = riders[j]
			continue
		}
		recheck, pending = append(recheck, o.Size), append(pending, i)
	}
	var rerun []Observation
	width := max(d.k, d.cfg.SideBySide)
	beside := d.besideReruns(suspects, recheck)
	for chunk := range slices.Chunk(recheck, width) {
		r, err := d.probeWith(ctx, PhaseRecheck, slices.Concat(chunk, beside), 0, true, len(beside))
		if err != nil {
			return nil, err
		}
		rerun = append(rerun, r[:len(chunk)]...)
		d.markDisagreeing(r[:len(chunk)], r[len(chunk):])
		beside = nil
	}
	for j, i := range pending {
		again[i] = rerun[j]
	}
	return again, nil
}

// besideReruns returns the proof's re-checks to run beside the re-runs of
// recheck (suspects' sizes), when trials side by side leave room for them
// (Config.ProofAlongside): those of the pair the bracket closes on if each
// suspect's re-run agrees with its first result, as proofAlongside picks
// them beside a round. A re-run that disagrees leaves them results of
// their sizes like any other; a right guess saves the proof a round.
func (d *driver) besideReruns(suspects []Observation, recheck []int) []int {
	room := d.cfg.SideBySide - len(recheck)
	if !d.cfg.ProofAlongside || d.cfg.Unproven || room < 1 || len(recheck) == 0 {
		return nil
	}
	trial := maps.Clone(d.belief)
	for _, o := range suspects {
		trial[o.Size] = o
	}
	lo, hi := bracketOf(trial, d.g, d.top(-1), -1)
	if lo < d.g.Min || hi != lo+d.g.Step || hi > d.g.Max {
		return nil
	}
	need := d.proving([][2]int{{lo, hi}}, recheck)
	return need[:min(len(need), room)]
}

// clearRoom returns the largest size at which the memory model leaves clear
// room, so that an OOM there is a surprise worth a re-run before it moves
// the boundary: below the smallest boundary the model allows (its
// prediction at the low end of the expected window, less its error bound)
// by a twentieth, and at least a grid step. It is below the grid when there
// is no model, or the model has been wrong about this workload. The model is
// the planner's: once failures that report their figures have moved its
// window, a failure inside the new window is no surprise.
func (d *driver) clearRoom() int {
	none := d.g.Min - d.g.Step
	if d.modelDoubted || d.cfg.Capacity == 0 || d.cfg.Strategy == Bisect {
		return none
	}
	v := d.planView(d.bracket())
	if v.Fit == nil || v.PeakLo <= 0 {
		return none
	}
	lo := uint64(v.PeakLo)
	room := v.Fit.MaxSize(lo) - v.Fit.Bound(lo)
	if math.IsNaN(room) || math.IsInf(room, 0) {
		return none
	}
	room = room*0.95 - float64(d.g.Step)
	if room < float64(d.g.Min) {
		return none
	}
	return d.g.Floor(plan.ToInt(room, d.g))
}
