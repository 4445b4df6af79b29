package search

import (
	"errors"
	"fmt"

	"github.com/batchfit/batchfit/internal/search/plan"
)

// Result is what a search found, and the evidence for it.
type Result struct {
	// Max is the answer: the largest grid size seen ok whose next grid size
	// was seen not to fit (or the grid's top). Valid when Found.
	Max   int
	Found bool
	// FirstFailure is the failing size that proves Max; 0 when Max is the
	// top of the range and nothing above it was tried.
	FirstFailure int
	Trials       []Observation // every observation in order, re-runs included
	// Rounds are the rounds the trials took, what a user waits for: a
	// Probe call is as many rounds as turns of the trials that run at once
	// (Config.Parallel, or SideBySide where more) its sizes take.
	Rounds int
	// ProofRounds are those of Rounds that only proved the answer once
	// the bracket was closed: the proof pair's re-checks and confirmations
	// (Config.Confirm), and every round of Settle. Re-checks that rode in
	// the search's own rounds (Config.ProofAlongside) cost none.
	ProofRounds int
	// NonMonotonic lists contradictions between sizes that held when re-run
	// (a failure at or below a size that ran). The search went on above
	// the size that ran: Max is the highest boundary found, and a size
	// below it may fail.
	NonMonotonic []Conflict
	// Flaky lists the sizes at the boundary seen both to fit and not to (a
	// re-check of the proof pair or a confirmation disagreed), in order.
	// The search believed their failures, so Max is the safe side: the
	// largest size below them that was seen to fit, twice, and never
	// failed. When Flaky is not empty Max is not exact: the boundary does
	// not reproduce.
	Flaky []FlakySize
	// Risk, when set, is where the failures put sizes at risk by their own
	// figures (a framework's pool: XLA's): Max, not exact, lies below
	// Risk.Size, which FirstFailure is, though no trial may have run it.
	Risk *Risk
	// Margin is the largest size whose measured peak leaves
	// Config.MarginPercent of Capacity free; 0 when not asked or none does.
	Margin int
	// Model is the last fit of peak memory against batch size, in units of
	// Figure; nil when none could be made.
	Model  *plan.Fit
	Figure Figure
	// Outside is the memory outside Figure that the capacity was taken to
	// lose where the boundary was decided (the CUDA context, measured);
	// 0 when none was, for the device figure, under an allocator cap and
	// in a framework's own pool.
	Outside float64
}

// Exact reports whether the answer is exact: found, every re-check of its
// boundary agreed, and the failures' figures put no size at or below it at
// risk.
func (r Result) Exact() bool { return r.Found && len(r.Flaky) == 0 && r.Risk == nil }

// FlakySize is a size whose trials disagreed: OK of them fitted and Failed
// did not.
type FlakySize struct {
	Size, OK, Failed int
}

// Conflict is a pair of trials that contradict each other: Ok ran at a
// size at or above the size at which Fail did not fit.
type Conflict struct {
	Ok, Fail Observation
}

// ErrNothingFits is matched (errors.Is) by the error Run returns when even the
// smallest size in range does not fit.
var ErrNothingFits = errors.New("nothing in range fits")

// NothingFitsError is returned when the smallest grid size does not fit.
type NothingFitsError struct {
	Observation Observation // the trial at the smallest size
}

func (e *NothingFitsError) Error() string {
	return fmt.Sprintf("batch size %d does not fit (%s): %v", e.Observation.Size, e.Observation.Outcome, ErrNothingFits)
}

// Is makes errors.Is(err, ErrNothingFits) true.
func (e *NothingFitsError) Is(target error) bool { return target == ErrNothingFits }

// CrashError is returned when a trial crashed: the command is broken at that
// size for a reason other than its size, so searching on would only measure
// the bug.
type CrashError struct {
	Observation Observation
}

func (e *CrashError) Error() string {
	return fmt.Sprintf("trial at batch size %d crashed", e.Observation.Size)
}

// Figure names the memory figure the model and margin use.
type Figure string

// The memory figures. Allocated is preferred: a fit on reserved or NVML
// memory under-predicts near the limit, because close to the limit the
// caching allocator frees its cached blocks and retries before it gives
// up, so memory that was reserved at small sizes is not needed at large
// ones (DESIGN.md, "Memory", has the figures).
const (
	FigureNone      Figure = ""
	FigureAllocated Figure = "allocated" // Memory.Allocated (PyTorch adapter)
	FigureDevice    Figure = "device"    // Memory.Device (NVML)
)

func (f Figure) of(m Memory) uint64 {
	switch f {
	case FigureAllocated:
		return m.Allocated
	case FigureDevice:
		return m.Device
	}
	return 0
}

// chooseFigure picks the figure every successful trial reports, Allocated
// first.
func chooseFigure(oks []Observation) Figure {
	for _, f := range []Figure{FigureAllocated, FigureDevice} {
		all := len(oks) > 0
		for _, o := range oks {
			if f.of(o.Memory) == 0 {
				all = false
				break
			}
		}
		if all {
			return f
		}
	}
	return FigureNone
}
