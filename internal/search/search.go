// Package search finds the exact largest batch size that runs. It is the
// driver, pure logic over a Prober: it runs the rounds that a planner of
// package plan chooses, decides what to believe when trials disagree, and
// when the boundary is proven, and never touches processes, clocks or GPUs
// itself.
package search

import (
	"context"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/search/plan"
)

// Observation is one finished trial as the search sees it.
// Its JSON keys are those of record.Trial, where doctor --json prints it.
type Observation struct {
	Size    int              `json:"batch_size"`
	Outcome classify.Outcome `json:"outcome"`
	// Memory is the trial's measured peak, used by model-guided strategies.
	// Zero fields are unknown.
	Memory Memory `json:"memory"`
	// Failure is what a trial that ran out of memory said about it (the
	// allocation that failed, what was held then); zero when unknown.
	Failure Failure `json:"failure,omitzero"`
	// Retry marks a re-run of a size whose first result contradicted the
	// others (a monotonicity check) or a confirmation run.
	Retry bool `json:"retry,omitempty"`
}

// Memory is a trial's measured peak memory in bytes; zero means unknown.
type Memory struct {
	Allocated uint64 `json:"peak_allocated_bytes,omitempty"` // PyTorch max_memory_allocated (adapter)
	Reserved  uint64 `json:"peak_reserved_bytes,omitempty"`  // PyTorch max_memory_reserved (adapter)
	Device    uint64 `json:"peak_device_bytes,omitempty"`    // NVML: peak sum over the trial's process tree
	// Limit is the framework's own pool limit (JAX's bytes_limit, 75 % of
	// the card unless told otherwise): the capacity that Allocated must fit
	// in, when below the card's.
	Limit uint64 `json:"limit_bytes,omitempty"`
}

// Failure is what an out-of-memory error says, in bytes; zero is unknown.
// It is the planners' own (plan.Failure): the failure at the bracket's top
// helps them place the boundary.
type Failure = plan.Failure

// Request is one Probe call: the sizes to run, and what their runs are for.
type Request struct {
	Sizes []int
	// Fresh says the call re-runs sizes to check them: a re-check (of a
	// contradiction, a surprise or the proof pair) or a confirmation. A
	// Prober that reuses warm processes must run these in fresh ones, or
	// the check proves nothing.
	Fresh bool
	// Rechecks is how many of Sizes, the last ones, re-run sizes beside
	// the round's new ones (the proof's re-checks that ride along it,
	// Config.ProofAlongside): a Prober that keeps records marks them as
	// re-runs, as it does a Fresh call's.
	Rechecks int
}

// Prober runs trials. Probe runs the request's sizes (concurrently where it
// can) and returns one observation per size in the same order. An error
// means the search cannot go on (canceled, or the trial could not be
// started); a trial that ran and failed is an observation, not an error.
type Prober interface {
	Probe(ctx context.Context, req Request) ([]Observation, error)
}

// ProberFunc adapts a function to Prober.
type ProberFunc func(ctx context.Context, req Request) ([]Observation, error)

// Probe calls f.
func (f ProberFunc) Probe(ctx context.Context, req Request) ([]Observation, error) {
	return f(ctx, req)
}

func fits(o Observation) bool     { return o.Outcome.Fits() }
func tooLarge(o Observation) bool { return o.Outcome.TooLarge() }

// agree reports whether two observations of one size say the same thing.
func agree(a, b Observation) bool { return fits(a) == fits(b) }
