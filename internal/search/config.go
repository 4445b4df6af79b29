package search

import (
	"errors"
	"fmt"

	"github.com/batchfit/batchfit/internal/search/plan"
)

// Strategy names how the search chooses the sizes to try.
type Strategy string

// The strategies. Both find the same, exact answer; they differ in how many
// trials it takes.
const (
	// Model fits peak memory against batch size and probes the predicted
	// boundary; it needs memory figures and a Capacity, and otherwise
	// searches like Bisect.
	Model Strategy = "model"
	// Bisect grows ×2 from the start until a size does not fit, then
	// bisects (k-ary with Parallel > 1).
	Bisect Strategy = "bisect"
)

// MaxBatch is the largest Max a search accepts; far beyond any real batch,
// and small enough that sizes never overflow.
const MaxBatch = 1 << 30

// Config says what to search and how.
type Config struct {
	// Min and Max bound the answer. Only multiples of MultipleOf are tried:
	// Min is rounded up to the grid and Max down.
	Min, Max   int
	MultipleOf int // the grid step; 0 means 1
	// Start is the first size tried; 0 leaves it to the strategy (Bisect:
	// Min; Model: a small size, at least 8, that is cheap to run). The
	// model strategy takes a Start as a guess of the answer: a first round
	// of several sizes spreads around it (plan.NewModelAround).
	Start int
	// Parallel is how many sizes one round may try at once: one for each
	// trial that runs at the same time, on every GPU; 0 means 1. Rounds,
	// not trials, are what a user waits for, so the planners fill them.
	Parallel int
	// SideBySide is how many trials one Probe call may run at once when
	// the prober runs several side by side on each GPU (a memory limit
	// that leaves room for more capped processes): all the GPUs' slots; 0
	// means Parallel. The proof's re-checks use them all. It is more than
	// Parallel only where the search's own trials cannot share a GPU (a
	// warm worker runs them one at a time, its fresh re-checks side by
	// side).
	SideBySide int
	// ProofAlongside lets a round that may close the bracket carry the
	// proof's re-checks in the trials SideBySide leaves beside its sizes
	// (driver.proofAlongside), so that the answer is proven in the round
	// that finds it. Only for a prober whose every trial is a fresh
	// process: the re-checks must be.
	ProofAlongside bool
	// Unproven ends Run when the bracket closes, without the proof's
	// re-checks and Confirm: the caller proves the answer with Settle, in
	// trials of another kind (on a held card, whose trials are the ones
	// that speak for the card). ProofAlongside is ignored with it.
	Unproven bool
	// Prior are trials of a more lenient kind than the Prober's (capped
	// to the limit, where Settle proves on a held card, which leaves a
	// trial no more than the cap did): a failure among them is a failure
	// of this kind too, believed until a trial of this kind at its size
	// says otherwise, and counted toward the failures the proof asks of
	// its size while none there fitted; their memory figures inform the
	// model. A success among them proves nothing here. The caller passes
	// only the failures it finally believed (none at a size that also ran,
	// none below its answer).
	Prior []Observation
	// Confirm re-runs the answer this many more times, each in a fresh
	// trial. If any of them does not fit, the answer is not trusted: the
	// size counts as a failure and the search goes on below it.
	Confirm  int
	Strategy Strategy // "" means Model
	// Capacity is the memory the workload may use, in the units of the
	// memory figures the trials report; 0 means unknown (Model then
	// searches like Bisect).
	Capacity uint64
	// AllocatorCap says Capacity caps PyTorch's allocator itself
	// (--memory-limit through per_process_memory_fraction), so the CUDA
	// context lies outside it. Otherwise Capacity is the whole card and the
	// context, measured as NVML's peak less the allocator's reserved peak,
	// comes off it.
	AllocatorCap bool
	// MarginPercent, when above 0, also asks for the largest size whose
	// measured peak leaves this share of Capacity free.
	MarginPercent float64
	// OnEvent, when set, is called with the search's progress, from the
	// goroutine that called Run.
	OnEvent func(Event)
}

// Validate reports the first thing wrong with c, in words a user can act on.
func (c Config) Validate() error {
	switch {
	case c.Min < 1:
		return fmt.Errorf("min batch size %d: must be at least 1", c.Min)
	case c.Max < 1:
		return fmt.Errorf("max batch size %d: must be at least 1", c.Max)
	case c.Max > MaxBatch:
		return fmt.Errorf("max batch size %d: above the largest supported, %d", c.Max, MaxBatch)
	case c.Min > c.Max:
		return fmt.Errorf("min batch size %d is above max %d", c.Min, c.Max)
	case c.MultipleOf < 0:
		return fmt.Errorf("multiple-of %d: must be at least 1", c.MultipleOf)
	case c.Parallel < 0:
		return fmt.Errorf("parallel %d: must be at least 1", c.Parallel)
	case c.Confirm < 0:
		return fmt.Errorf("confirm %d: must not be negative", c.Confirm)
	case c.Start < 0:
		return fmt.Errorf("start %d: must not be negative", c.Start)
	case c.Start != 0 && (c.Start < c.Min || c.Start > c.Max):
		return fmt.Errorf("start %d is outside [%d, %d]", c.Start, c.Min, c.Max)
	case c.Strategy != "" && c.Strategy != Model && c.Strategy != Bisect:
		return fmt.Errorf("unknown strategy %q (want %q or %q)", c.Strategy, Model, Bisect)
	case c.MarginPercent < 0 || c.MarginPercent > 90 || c.MarginPercent != c.MarginPercent:
		return fmt.Errorf("margin %g%%: must be between 0 and 90", c.MarginPercent)
	case c.MarginPercent > 0 && c.Capacity == 0:
		return errors.New("a margin needs the memory capacity, which is unknown")
	}
	g := c.grid()
	if g.Min > g.Max {
		return fmt.Errorf("no multiple of %d lies in [%d, %d]", g.Step, c.Min, c.Max)
	}
	return nil
}

// grid is the set of sizes the search may try: multiples of MultipleOf
// in [Min, Max], Min rounded up to it and Max down.
func (c Config) grid() plan.Grid {
	step := max(c.MultipleOf, 1)
	return plan.Grid{
		Min:  (c.Min + step - 1) / step * step,
		Max:  c.Max / step * step,
		Step: step,
	}
}
