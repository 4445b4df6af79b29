package search

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/batchfit/batchfit/internal/search/plan"
)

// Run searches for the largest batch size in cfg's range that fits, trying
// sizes through p. It returns the Result so far with every error: a
// *CrashError when a trial crashed, a *NothingFitsError when even the
// smallest size does not fit, and the cause, wrapped, when the context or
// the Prober ended the search.
//
// The search keeps a bracket: lo, the largest size believed to fit (below
// any flaky size, and any the failures put at risk), and hi, the smallest
// believed not to above it. A planner chooses sizes strictly inside it;
// the search ends when hi is lo's next grid size, or lo is the top.
func Run(ctx context.Context, cfg Config, p Prober) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("invalid search: %w", err)
	}
	d := newDriver(cfg, p)
	if cfg.Strategy == Bisect || cfg.Capacity == 0 {
		d.planner = plan.NewBisect(d.startOr(d.g.Min))
	} else {
		// Eight samples: small enough to be cheap and to fit almost
		// anything, large enough that the per-sample cost shows above the
		// allocator's rounding.
		d.planner = plan.NewModel(d.startOr(d.g.Ceil(8)))
		if d.cfg.Start != 0 {
			d.planner = plan.NewModelAround(d.startOr(0))
		}
	}
	err := d.run(ctx)
	d.finish()
	return d.res, err
}

type driver struct {
	probing
	cfg     Config
	k       int
	planner plan.Planner
	margin  plan.Planner

	res Result
	// belief holds, per size, the observation the search believes: the
	// latest at that size (a re-check's, where one was made). A size can be
	// believed to fit above one believed not to, when a contradiction held;
	// the bracket then lies above both (bracket).
	belief    map[int]Observation
	confirmed map[int]int // passed confirmation runs per size
	// flaky holds the sizes seen both to fit and not to at the boundary
	// (a re-check or a confirmation disagreed): believed not to fit from
	// then on, whatever later trials say, so the answer is the safe side.
	flaky map[int]bool
	// fromPrior holds the sizes whose belief is a Config.Prior failure: a
	// trial here that disagrees replaces it, and makes no size flaky.
	fromPrior map[int]bool
	// modelDoubted is set when an OOM the model did not expect held on a
	// re-run: the model is wrong about this workload, so its surprise is no
	// reason to re-run later failures.
	modelDoubted bool
}

func newDriver(cfg Config, p Prober) *driver {
	d := &driver{
		probing:   probing{p: p, g: cfg.grid(), onEvent: cfg.OnEvent, width: max(cfg.Parallel, cfg.SideBySide, 1)},
		cfg:       cfg,
		k:         max(cfg.Parallel, 1),
		margin:    plan.NewMargin(),
		belief:    map[int]Observation{},
		confirmed: map[int]int{},
		flaky:     map[int]bool{},
		fromPrior: map[int]bool{},
	}
	// Config.Prior's failures bound the search as its own would, until a
	// trial of its own at the size says otherwise.
	for _, o := range cfg.Prior {
		if _, seen := d.belief[o.Size]; !seen && tooLarge(o) {
			d.belief[o.Size] = o
			d.fromPrior[o.Size] = true
		}
	}
	return d
}

// startOr returns the configured start, on the grid, or def.
func (d *driver) startOr(def int) int {
	if d.cfg.Start != 0 {
		return d.g.Clamp(d.g.Ceil(d.cfg.Start))
	}
	return d.g.Clamp(def)
}

func (d *driver) run(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("search stopped: %w", err)
		}
		lo, hi := d.bracket()
		if d.noteRisk(hi) {
			continue
		}
		d.noteBracket(lo, hi)
		if hi == d.g.Min {
			return &NothingFitsError{Observation: d.belief[hi]}
		}
		if hi > lo+d.g.Step {
			phase := PhaseRefine
			if hi > d.g.Max {
				phase = PhaseBracket
			}
			sizes, predicted, rechecks, ok := d.riskEdge(lo, hi)
			if !ok {
				v := d.planView(lo, hi)
				sizes, predicted = d.planner.Next(v)
				rechecks = d.proofAlongside(v, sizes)
			}
			if err := d.roundWith(ctx, phase, sizes, predicted, rechecks); err != nil {
				return err
			}
			continue
		}
		// The bracket is closed on lo.
		if !d.cfg.Unproven {
			if sizes, proven := d.proofRecheck(lo, hi); !proven {
				if err := d.recheckProof(ctx, sizes); err != nil {
					return err
				}
				continue
			}
		}
		if n := d.cfg.Confirm - d.confirmed[lo]; n > 0 && !d.cfg.Unproven {
			if err := d.confirm(ctx, lo, min(n, max(d.k, d.cfg.SideBySide))); err != nil {
				return err
			}
			continue
		}
		if mlo, mhi, ok := d.marginBracket(); ok && mhi > mlo+d.g.Step {
			sizes, predicted := d.margin.Next(d.marginView(mlo, mhi))
			if err := d.round(ctx, PhaseMargin, sizes, predicted); err != nil {
				return err
			}
			continue
		}
		d.res.Found = true
		d.res.Max = lo
		if hi <= d.g.Max {
			d.res.FirstFailure = hi
		}
		return nil
	}
}

// finish fills in the parts of the result that summarise the beliefs.
func (d *driver) finish() {
	d.res.Trials, d.res.Rounds, d.res.ProofRounds = d.trials, d.rounds, d.proofRounds
	if d.settling {
		d.res.ProofRounds = d.rounds
	}
	if r := d.res.Risk; r != nil && d.res.Found && d.res.FirstFailure != r.Size {
		// A size below the risk failed, and its re-checks proved the
		// boundary there (riskEdge's probe can find one): the risk is
		// about sizes above the answer's first failure, no longer its own.
		d.res.Risk = nil
	}
	for _, s := range slices.Sorted(maps.Keys(d.flaky)) {
		ok, failed := d.tally(s)
		d.res.Flaky = append(d.res.Flaky, FlakySize{Size: s, OK: ok, Failed: failed})
	}
	_, hi := d.bracket()
	fig, points := d.points(hi)
	d.res.Figure = fig
	if _, pooled := d.capacity(); fig == FigureAllocated && !pooled {
		d.res.Outside = max(d.context(hi), 0)
	}
	if f, err := plan.Estimate(points); err == nil {
		d.res.Model = &f
	}
	if mlo, mhi, ok := d.marginBracket(); ok && d.res.Found && mhi == mlo+d.g.Step && mlo >= d.g.Min {
		d.res.Margin = mlo
	}
}
