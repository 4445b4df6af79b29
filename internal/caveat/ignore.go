// Package caveat reads what a search's trials and result say besides the
// answer: that the command ignores its batch size, which stops the search,
// and the warnings an answer carries (sizes put at risk by a pool's
// shortfall, a boundary fragmentation decided, a command that may not use
// the size). Records and results in, an error or words out.
package caveat

import (
	"fmt"
	"slices"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/units"
)

// A command that never reads its batch size runs the same work at every
// size: it "fits" up to --max, and that answer means nothing. Its ok trials
// show it: the same peak memory and the same step time at sizes far apart.
// A workload that uses its batch holds, at its peak, at least the batch's
// inputs, outputs and saved activations, so its peak grows by some bytes a
// sample; the rule below only calls a command flat where that growth would
// have shown.
//
// The peaks are compared in the figure the memory model uses: the
// framework's own count (allocated) when every ok trial reports it, else
// NVML's peak of the process tree (device).
//
// What the rule cannot tell from a command that ignores its size: a model
// that holds under leastPerSample bytes a sample (a logistic regression on
// a few features), and one whose peak comes before its steps (a checkpoint
// loaded in fp32, then cast) where the steps report no times; both would
// only be stopped at sizes 4096 or more apart.
const (
	// flatAllocated is how far apart the allocated peaks of one piece of
	// work may lie from run to run: the allocator's count is exact and
	// repeats to the byte unless an autotuner picks another workspace. It
	// is absolute, not a share of the peak: a model whose weights and
	// optimizer state fill most of a large card (a full fine-tune) gains
	// only a few hundred MiB over 3 more samples, under 1 % of its peak.
	flatAllocated = 512 << 10
	// flatDevice is the same for NVML, which rounds to the allocator's
	// segments (2 and 20 MiB) and is sampled, so a short spike can be
	// missed.
	flatDevice = 16 << 20
	// leastPerSample is less memory than any training step holds per
	// sample at its peak: 64 float32 values for the input, the output and
	// every activation kept for the backward pass (MNIST's input alone is
	// 784 bytes). Sizes a and b are only compared where (b-a) samples at
	// that cost come to twice the tolerance: the second half covers the
	// allocator's rounding (512 bytes a tensor). That is b-a >= 4096 for
	// the allocated figure, and b-a >= 131072 for NVML: above the default
	// --max, so NVML figures alone do not stop a search unless --max is
	// raised.
	leastPerSample = 256
	// flatStepRatio is how far apart the median step times of one piece of
	// work may lie (clocks, other tenants). Four times the batch takes
	// longer wherever compute, not launches, bounds the step: this saves
	// the workloads whose memory is weights-dominated, and gradient
	// accumulation over a fixed micro-batch, where an optimizer step of
	// more micro-batches takes longer at the same peak.
	flatStepRatio = 1.25
	// preallocatedShare: an NVML peak at or above this share of the card
	// may be a pool the framework takes whatever the batch (JAX takes 75 %
	// of the card, TensorFlow nearly all of it), so it says nothing.
	preallocatedShare = 0.5
)

// IgnoresBatchSizeError stops a search whose trials ran the same work at
// sizes four or more times apart: the command does not seem to use the
// batch size, and searching on would only report --max.
type IgnoresBatchSizeError struct {
	// Small and Large are the smallest and largest sizes that ran.
	Small, Large int
	// Figure names the memory figure compared, and SmallPeak and LargePeak
	// are its values at the two sizes.
	Figure               search.Figure
	SmallPeak, LargePeak uint64
	// SmallStep and LargeStep are the median step times in seconds; 0 when
	// unknown.
	SmallStep, LargeStep float64
	// Placeholder is set when the command has {}, SizeRead when the
	// program took its size from batchfit.batch_size() (record.Trial), and
	// Worker when a warm worker gave the Trial its sizes.
	Placeholder, SizeRead, Worker bool
}

func (e *IgnoresBatchSizeError) Error() string {
	msg := fmt.Sprintf("the command does not seem to use the batch size: peak memory (%s) %s at batch size %d and %s at %d",
		e.Figure, units.Bytes(e.SmallPeak), e.Small, units.Bytes(e.LargePeak), e.Large)
	if e.SmallStep > 0 && e.LargeStep > 0 {
		msg += fmt.Sprintf(", median step %s and %s", units.Duration(e.SmallStep), units.Duration(e.LargeStep))
	}
	return msg
}

// Hint says how to pass the size.
func (e *IgnoresBatchSizeError) Hint() string {
	switch {
	case e.Worker:
		return "the worker passes each size to the Trial's step(state, batch_size): check that the step builds its batch from it"
	case e.SizeRead:
		return "check that the size batchfit.batch_size() returns sets the batch size each step runs (not overridden by a config file, not a gradient-accumulation count)"
	case e.Placeholder:
		return "check that the option {} fills sets the batch size each step runs (not overridden by a config file, not a gradient-accumulation count); the size is also in BATCHFIT_BATCH_SIZE"
	}
	return "pass the size with {} in the command (--batch-size {}), or read BATCHFIT_BATCH_SIZE"
}

// flatness is what a search's ok trials say about the memory a sample costs.
type flatness struct {
	// figure is the peak compared; "" when the trials do not all report
	// one that can be trusted.
	figure search.Figure
	// small and large are the ok trials at the smallest and largest sizes.
	small, large record.Trial
	// spread is the largest peak less the smallest, over every ok trial;
	// tolerance is what one piece of work may vary by.
	spread, tolerance uint64
	// steps: the median step times of the trials that report them.
	steps []float64
}

// measureFlatness reads the ok trials; capacity is the memory a trial may
// use (the card or --memory-limit), 0 when unknown.
func measureFlatness(trials []record.Trial, capacity uint64) flatness {
	var oks []record.Trial
	for _, t := range trials {
		if t.Outcome == classify.OK {
			oks = append(oks, t)
		}
	}
	var f flatness
	if len(oks) < 2 {
		return f
	}
	f.small, f.large = oks[0], oks[0]
	for _, t := range oks {
		if t.Size < f.small.Size {
			f.small = t
		}
		if t.Size > f.large.Size {
			f.large = t
		}
		if s := t.StepSeconds(); s > 0 {
			f.steps = append(f.steps, s)
		}
	}
	peak := func(t record.Trial) uint64 { return t.Allocated }
	f.figure, f.tolerance = search.FigureAllocated, flatAllocated
	if !allReport(oks, peak) {
		peak = func(t record.Trial) uint64 { return t.Device }
		f.figure, f.tolerance = search.FigureDevice, flatDevice
		top := uint64(0)
		for _, t := range oks {
			top = max(top, t.Device)
		}
		if !allReport(oks, peak) || capacity == 0 || float64(top) >= preallocatedShare*float64(capacity) {
			f.figure, f.tolerance = "", 0
			return f
		}
	}
	lo, hi := peak(oks[0]), peak(oks[0])
	for _, t := range oks {
		lo, hi = min(lo, peak(t)), max(hi, peak(t))
	}
	f.spread = hi - lo
	return f
}

func allReport(trials []record.Trial, peak func(record.Trial) uint64) bool {
	for _, t := range trials {
		if peak(t) == 0 {
			return false
		}
	}
	return true
}

// grew reports whether the peaks or the step times varied beyond what one
// piece of work varies by: the command uses the batch size.
func (f flatness) grew() bool {
	return (f.figure != "" && f.spread > f.tolerance) || !f.stepsFlat()
}

// stepsFlat reports whether the median step times, where two or more
// trials report them, lie within flatStepRatio of each other.
func (f flatness) stepsFlat() bool {
	return len(f.steps) < 2 || slices.Max(f.steps) <= flatStepRatio*slices.Min(f.steps)
}

// ignored reports whether the trials show the same work at every size:
// every ok trial's peak within the tolerance of the others, between sizes
// a and b >= 4a whose difference, at leastPerSample bytes a sample, comes
// to twice the tolerance; and, where two or more trials report step
// times, their medians within flatStepRatio of each other.
func (f flatness) ignored() bool {
	a, b := f.small.Size, f.large.Size
	return f.figure != "" && f.spread <= f.tolerance && b >= 4*a &&
		uint64(b-a)*leastPerSample >= 2*f.tolerance && f.stepsFlat()
}

func (f flatness) error(placeholder, sizeRead, worker bool) *IgnoresBatchSizeError {
	peak := f.small.Allocated
	large := f.large.Allocated
	if f.figure == search.FigureDevice {
		peak, large = f.small.Device, f.large.Device
	}
	return &IgnoresBatchSizeError{
		Small: f.small.Size, Large: f.large.Size, Figure: f.figure,
		SmallPeak: peak, LargePeak: large,
		SmallStep: f.small.StepSeconds(), LargeStep: f.large.StepSeconds(),
		Placeholder: placeholder, SizeRead: sizeRead, Worker: worker,
	}
}

// Ignored is the error that stops a search whose ok trials show the same
// work at sizes far apart (flatness.ignored); nil while they do not.
// capacity is the memory a trial may use (the card or --memory-limit), 0
// when unknown; placeholder says the command has {}, worker that a warm
// worker runs the trials.
func Ignored(trials []record.Trial, capacity uint64, placeholder, worker bool) *IgnoresBatchSizeError {
	if f := measureFlatness(trials, capacity); f.ignored() {
		return f.error(placeholder, SizeRead(trials), worker)
	}
	return nil
}

// SizeRead reports whether a trial's program took its batch size from
// batchfit.batch_size(). Such a program gets the size as surely as through
// {} in its arguments, so a command without {} is then judged as one with
// it: no warning that only the environment carries the size, and the
// evidence of flat trials, not the missing {}, decides whether it ignores
// the size.
func SizeRead(trials []record.Trial) bool {
	return slices.ContainsFunc(trials, func(t record.Trial) bool { return t.SizeRead })
}

// UnusedSize is the warning for a search that ran every size up to max
// when its trials could not stop it as a command that ignores the size (no
// memory figures, or too few), yet nothing showed that it uses it: a
// command without {} (placeholder false) whose program did not take its
// size from batchfit.batch_size() (SizeRead), or one that gets the size
// either way but whose step times stayed flat (PyTorch on a CPU, where
// there are step times but no memory figures). Step times alone warn
// rather than stop: a small model's steps can be bound by launches at
// every size. "" when there is nothing to warn about.
func UnusedSize(trials []record.Trial, capacity uint64, max int, placeholder bool) string {
	f := measureFlatness(trials, capacity)
	if f.grew() || f.small.Size == 0 || max < 4*f.small.Size {
		return ""
	}
	read := SizeRead(trials)
	if !placeholder && !read {
		return fmt.Sprintf("every size up to --max %d ran and the command has no {}: check that it uses BATCHFIT_BATCH_SIZE", max)
	}
	if len(f.steps) < 2 {
		return ""
	}
	what := "{} sets"
	if read {
		what = "the size batchfit.batch_size() returns sets"
	}
	return fmt.Sprintf("every size up to --max %d ran in the same time a step (%s at batch size %d, %s at %d): check that %s the batch size each step runs",
		max, units.Duration(f.small.StepSeconds()), f.small.Size, units.Duration(f.large.StepSeconds()), f.large.Size, what)
}
