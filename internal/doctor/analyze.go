package doctor

import (
	"fmt"
	"strings"

	"github.com/batchfit/batchfit/internal/units"
	"github.com/batchfit/batchfit/internal/worker"
)

// Severity says how much a finding matters.
type Severity string

// The severities, worst first.
const (
	Problem Severity = "problem" // trials in one process are not independent
	Warning Severity = "warning" // they may not be; or a check could not run
	Info    Severity = "info"
	OK      Severity = "ok"
)

// Finding is one conclusion, with its numbers, its likely cause and a fix.
type Finding struct {
	Kind     string   `json:"kind"`
	Severity Severity `json:"severity"`
	Summary  string   `json:"summary"`
	// Bytes is the finding's main figure (memory retained, peak
	// difference); 0 when it has none.
	Bytes int64  `json:"bytes,omitempty"`
	Cause string `json:"cause,omitempty"`
	Fix   string `json:"fix,omitempty"`
	// Tensors are the largest tensors still alive, where the worker named
	// them.
	Tensors []worker.Tensor `json:"tensors,omitempty"`
}

// The finding kinds.
const (
	KindGrowing          = "retained_growing"
	KindRetained         = "retained_per_trial"
	KindRetainedAfterOOM = "retained_after_oom"
	KindNonMonotonic     = "non_monotonic"
	KindPeakAfterOOM     = "peak_after_oom"
	KindFragmentation    = "fragmentation"
	KindOptimizerState   = "optimizer_state_created"
	KindNoOptimizer      = "no_optimizer"
	KindResetFailed      = "reset_failed"
	KindFreshFails       = "fresh_fails"
	KindPeakDiffers      = "peak_differs_from_fresh"
	KindPeakMatches      = "peak_matches_fresh"
	KindNoComparison     = "no_fresh_comparison"
	KindNoOOM            = "no_oom"
	KindStopped          = "stopped"
	KindClean            = "clean"
)

// Thresholds below which differences are noise rather than findings.
// Retained memory has none: the allocator counts whole blocks, so any
// difference from the baseline is a live allocation.
const (
	// Peaks at one size in one program are normally identical; allow for
	// allocator rounding and workspace choices.
	peakSlackBytes   = 2 << 20
	peakSlackPercent = 1.0
	// Reserved-but-unallocated memory after empty_cache() is the free part
	// of segments that still hold live blocks; tens of MiB are normal.
	fragSlackBytes = 64 << 20
)

// Analyze turns a report's trials into findings, problems first.
func Analyze(r *Report) []Finding {
	a := analysis{r: r, memory: r.Worker.Verify == "cuda_allocated"}
	a.resetFailures()
	a.retainedAcrossRepeats()
	a.afterOOM()
	a.fragmentation()
	a.optimizerState()
	a.fresh()
	a.coverage()
	var out []Finding
	for _, sev := range []Severity{Problem, Warning, Info} {
		for _, f := range a.found {
			if f.Severity == sev {
				out = append(out, f)
			}
		}
	}
	if !a.has(Problem) && !a.has(Warning) && len(r.Trials) > 0 && r.Stopped == "" {
		clean := Finding{Kind: KindClean, Severity: OK,
			Summary: "memory returned exactly to the baseline after every trial"}
		if r.OOMSize > 0 {
			clean.Summary += ", the out-of-memory one included"
		}
		clean.Summary += ": in this worker, trials do not carry memory over to the next"
		out = append([]Finding{clean}, out...)
	}
	return out
}

type analysis struct {
	r      *Report
	memory bool // the worker reports CUDA allocator figures
	found  []Finding
}

func (a *analysis) add(f Finding) { a.found = append(a.found, f) }

func (a *analysis) has(s Severity) bool {
	for _, f := range a.found {
		if f.Severity == s {
			return true
		}
	}
	return false
}

func (a *analysis) phase(p Phase) []Trial {
	var out []Trial
	for _, t := range a.r.Trials {
		if t.Phase == p {
			out = append(out, t)
		}
	}
	return out
}

// what names the figure that verification compares.
func (a *analysis) what() string {
	if a.memory {
		return "allocated"
	}
	return "held by live tensors"
}

func (a *analysis) resetFailures() {
	for _, t := range a.r.Trials {
		if t.ResetError == "" {
			continue
		}
		a.add(Finding{Kind: KindResetFailed, Severity: Problem,
			Summary: fmt.Sprintf("the reset after trial %d (batch size %d) failed: %s", t.ID, t.Size, t.ResetError),
			Cause:   "the CUDA context is broken (an illegal memory access or a device-side assert is sticky: every later CUDA call fails)",
			Fix:     "fix the error in the step first; no trial after it in this process can be trusted"})
		return
	}
}

func (a *analysis) retainedAcrossRepeats() {
	reps := a.phase(PhaseRepeat)
	if len(reps) == 0 {
		return
	}
	last := reps[len(reps)-1]
	if last.RetainedBytes == 0 && allZero(reps) {
		return
	}
	growing := len(reps) >= 2
	for i := 1; i < len(reps); i++ {
		if reps[i].RetainedBytes <= reps[i-1].RetainedBytes {
			growing = false
		}
	}
	if growing {
		first := reps[0].RetainedBytes
		per := (last.RetainedBytes - first) / int64(len(reps)-1)
		a.add(Finding{Kind: KindGrowing, Severity: Problem, Bytes: per,
			Summary: fmt.Sprintf("memory %s grows with every trial at batch size %d: %s above the baseline after trial 1, %s after trial %d (%s more per trial)",
				a.what(), a.r.Size, units.SignedBytes(first), units.SignedBytes(last.RetainedBytes), len(reps), units.SignedBytes(per)),
			Cause: "something accumulates references across steps: a list of losses or outputs that holds tensors " +
				"(each keeps its memory, and before backward its whole autograd graph), metrics summed as tensors, a cache keyed by batch",
			Fix:     "keep Python numbers (losses.append(loss.item()), float(metric)), or detach().cpu() what must be kept; clear caches at the end of step",
			Tensors: last.RetainedTensors})
		return
	}
	a.add(Finding{Kind: KindRetained, Severity: Problem, Bytes: last.RetainedBytes,
		Summary: fmt.Sprintf("%s stays %s after every trial at batch size %d (the reset cannot free it)",
			units.SignedBytes(last.RetainedBytes), a.what(), a.r.Size),
		Cause: "the step keeps its last batch, outputs or loss where they outlive it (an attribute such as self.last_batch = batch, a global), " +
			"or builds something during the first trial and keeps it (a lazily created buffer or cache)",
		Fix:     "del them, or set them to None, at the end of step; build buffers and caches in setup",
		Tensors: last.RetainedTensors})
}

func allZero(ts []Trial) bool {
	for _, t := range ts {
		if t.RetainedBytes != 0 {
			return false
		}
	}
	return true
}

// oomTrial returns the trial that did not fit, and the trial before it.
func (a *analysis) oomTrial() (oom, before *Trial) {
	for i := range a.r.Trials {
		t := &a.r.Trials[i]
		if t.Phase == PhaseGrow && t.Outcome.TooLarge() {
			if i > 0 {
				before = &a.r.Trials[i-1]
			}
			return t, before
		}
	}
	return nil, nil
}

func (a *analysis) afterOOM() {
	oom, before := a.oomTrial()
	if oom == nil {
		return
	}
	var prev int64
	if before != nil {
		prev = before.RetainedBytes
	}
	leak := oom.RetainedBytes - prev
	after := a.phase(PhaseAfterOOM)
	reps := a.phase(PhaseRepeat)
	var lastRep *Trial
	if len(reps) > 0 {
		lastRep = &reps[len(reps)-1]
	}
	peakNote := ""
	if len(after) > 0 && lastRep != nil && a.memory && after[0].Outcome.Fits() && lastRep.Outcome.Fits() {
		d := int64(after[0].PeakAllocated) - int64(lastRep.PeakAllocated)
		if differs(after[0].PeakAllocated, lastRep.PeakAllocated) {
			peakNote = fmt.Sprintf("; the peak at batch size %d went from %s before the OOM to %s after it (%s)",
				a.r.Size, units.Bytes(lastRep.PeakAllocated), units.Bytes(after[0].PeakAllocated), units.SignedBytes(d))
			if leak <= 0 {
				a.add(Finding{Kind: KindPeakAfterOOM, Severity: Warning, Bytes: d,
					Summary: strings.TrimPrefix(peakNote, "; ") + ", though nothing stayed allocated",
					Cause:   "the OOM changed how the allocator or a library behaves (cached cuDNN/cuBLAS algorithm or workspace choices made under memory pressure)",
					Fix:     "start a fresh process after an OOM (batchfit's worker does, by default)"})
			}
		}
	}
	if leak > 0 {
		a.add(Finding{Kind: KindRetainedAfterOOM, Severity: Problem, Bytes: leak,
			Summary: fmt.Sprintf("%s stays %s after the out-of-memory error at batch size %d (%s before it)%s",
				units.SignedBytes(leak), a.what(), oom.Size, units.SignedBytes(prev), peakNote),
			Cause: "the failed step's tensors are still referenced. batchfit's worker clears the traceback of the error it catches, " +
				"so the references are in the Trial's code: a retry inside `except` (the block keeps the failed step's frames, " +
				"with its input batch and autograd graph, alive until it ends), a kept exception or sys.exc_info(), " +
				"or the batch or outputs stored on self or in a global during the step",
			Fix: "move the retry out of the except block (note the failure in except, retry after it); do not keep exceptions or tracebacks; " +
				"do not store the batch or outputs beyond the step (or clear them in a finally: block)",
			Tensors: oom.RetainedTensors})
	}
	if len(after) > 0 && lastRep != nil && lastRep.Outcome.Fits() && after[0].Outcome.TooLarge() {
		a.add(Finding{Kind: KindNonMonotonic, Severity: Problem,
			Summary: fmt.Sprintf("batch size %d ran %d times before the OOM at %d and fails after it (%s): a search in this process would report a smaller size than fits, as in the question's log",
				a.r.Size, len(reps), oom.Size, after[0].Outcome),
			Cause: "memory the OOM left behind (see above) is missing for every later trial",
			Fix:   "free what the failed step held, or run every trial in a fresh process (batchfit search without --worker)"})
	}
}

func (a *analysis) fragmentation() {
	if !a.memory {
		return
	}
	h := a.r.Worker
	base := int64(h.BaselineReserved) - int64(h.BaselineAllocated)
	var worst *Trial
	var worstFrag int64
	for i := range a.r.Trials {
		t := &a.r.Trials[i]
		if t.ReservedAfter == 0 && t.AllocatedAfter == 0 {
			continue
		}
		if f := int64(t.ReservedAfter) - int64(t.AllocatedAfter); worst == nil || f > worstFrag {
			worst, worstFrag = t, f
		}
	}
	if worst == nil || worstFrag-base <= fragSlackBytes {
		return
	}
	when := fmt.Sprintf("trial %d (batch size %d, %s)", worst.ID, worst.Size, worst.Outcome)
	a.add(Finding{Kind: KindFragmentation, Severity: Warning, Bytes: worstFrag,
		Summary: fmt.Sprintf("after %s, %s is reserved but not allocated even after empty_cache() (%s at the baseline)",
			when, units.Bytes(uint64(max(worstFrag, 0))), units.SignedBytes(base)),
		Cause: "tensors still alive sit in the caching allocator's segments, which empty_cache() can only return whole; " +
			"the rest of those segments stays reserved and may not serve a request of another size",
		Fix: "free what stays allocated (see above); set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (torch 2.1 or later); " +
			"or start a fresh process after an OOM (batchfit's default)"})
}

func (a *analysis) optimizerState() {
	h := a.r.Worker
	for _, t := range a.r.Trials {
		if !t.OptimizerStateCreated {
			continue
		}
		grew := int64(t.OptimizerStateBytes) - int64(h.OptimizerStateBytes)
		a.add(Finding{Kind: KindOptimizerState, Severity: Problem, Bytes: grew,
			Summary: fmt.Sprintf("the optimizer's state grew by %s during trial %d (batch size %d), after the warm-up (%d step(s) at batch size %d)",
				units.SignedBytes(grew), t.ID, t.Size, h.WarmupSteps, h.WarmupSize),
			Cause: "optimizer state (Adam keeps two tensors per parameter) is created lazily, on the first step that updates each parameter; " +
				"the first measured trial then pays for it and later ones do not. Here the warm-up did not make all of it: a GradScaler that " +
				"skipped the warm-up's steps (inf/NaN gradients), parameters that get gradients only at some sizes, or an optimizer built inside step",
			Fix: "build the optimizer once, in setup; run a warm-up step that really steps before measuring " +
				"(BATCHFIT_WORKER_WARMUP sets the worker's warm-up batch size)"})
		break
	}
	if h.Optimizers == 0 && h.Torch != "" {
		a.add(Finding{Kind: KindNoOptimizer, Severity: Warning,
			Summary: "the worker found no torch.optim.Optimizer on the Trial",
			Cause:   "the worker looks through the Trial's attributes (or setup()'s returned state) for optimizers and modules, to drop gradients between trials and to notice optimizer state created during them",
			Fix:     "keep the optimizer as an attribute (self.optimizer = ...) or in the state setup() returns"})
	}
}

func (a *analysis) fresh() {
	r := a.r
	if r.FreshError != "" {
		a.add(Finding{Kind: KindNoComparison, Severity: Warning,
			Summary: "the fresh-process comparison did not run: " + r.FreshError})
		return
	}
	if r.Fresh == nil {
		return
	}
	reps := a.phase(PhaseRepeat)
	if len(reps) == 0 {
		return
	}
	w := reps[0]
	f := *r.Fresh
	switch {
	case w.Outcome.Fits() && !f.Outcome.Fits():
		a.add(Finding{Kind: KindFreshFails, Severity: Problem,
			Summary: fmt.Sprintf("batch size %d runs in the worker but not in a fresh process (%s)", r.Size, f.Outcome),
			Cause:   "a fresh process needs memory a warm worker no longer does: optimizer state made during its first step, weights moved to the GPU, one-time workspaces",
			Fix:     "trust the fresh process: batchfit confirms a warm search's answer in fresh processes"})
	case !w.Outcome.Fits() && f.Outcome.Fits():
		a.add(Finding{Kind: KindFreshFails, Severity: Problem,
			Summary: fmt.Sprintf("batch size %d fails in the worker (%s) but runs in a fresh process", r.Size, w.Outcome),
			Cause:   "the worker carries memory or state from its setup or warm-up that a fresh process does not have",
			Fix:     "search without --worker, or find what setup keeps (batchfit doctor's other findings)"})
	case !a.memory || f.Memory.Allocated == 0 || w.PeakAllocated == 0:
		a.add(Finding{Kind: KindNoComparison, Severity: Info,
			Summary: fmt.Sprintf("batch size %d runs in the worker and in a fresh process; there are no allocator figures to compare (no CUDA)", r.Size)})
	case differs(w.PeakAllocated, f.Memory.Allocated):
		d := int64(w.PeakAllocated) - int64(f.Memory.Allocated)
		fd := Finding{Kind: KindPeakDiffers, Severity: Warning, Bytes: d,
			Summary: fmt.Sprintf("the worker's peak at batch size %d is %s, a fresh process's %s (%s)",
				r.Size, units.Bytes(w.PeakAllocated), units.Bytes(f.Memory.Allocated), units.SignedBytes(d))}
		if d < 0 {
			fd.Cause = "a fresh process allocates some things once, at the start, and its peak includes them: optimizer state on the first step, weights moved to the GPU, workspaces"
			fd.Fix = "confirm answers in fresh processes (batchfit does); if the difference matters near the limit, search without --worker"
		} else {
			fd.Cause = "the worker carries something from its setup, warm-up or earlier trials that a fresh process does not (see the other findings), or the warm-up changed an algorithm choice (torch.backends.cudnn.benchmark)"
			fd.Fix = "find what stays allocated; confirm answers in fresh processes (batchfit does)"
		}
		a.add(fd)
	default:
		a.add(Finding{Kind: KindPeakMatches, Severity: Info,
			Summary: fmt.Sprintf("the worker's peak at batch size %d matches a fresh process's (%s and %s)",
				r.Size, units.Bytes(w.PeakAllocated), units.Bytes(f.Memory.Allocated))})
	}
}

func (a *analysis) coverage() {
	r := a.r
	if r.Stopped != "" {
		a.add(Finding{Kind: KindStopped, Severity: Warning, Summary: "the protocol stopped early: " + r.Stopped})
		return
	}
	if r.OOMSize == 0 && len(a.phase(PhaseRepeat)) > 0 {
		a.add(Finding{Kind: KindNoOOM, Severity: Info,
			Summary: fmt.Sprintf("nothing up to batch size %d ran out of memory, so the after-OOM checks did not run", r.MaxSize),
			Fix:     "raise --max, or emulate a smaller card with --memory-limit"})
	}
}

// differs reports whether two peaks differ by more than allocator noise.
func differs(a, b uint64) bool {
	d := int64(a) - int64(b)
	if d < 0 {
		d = -d
	}
	slack := max(float64(max(a, b))*peakSlackPercent/100, peakSlackBytes)
	return float64(d) > slack
}
