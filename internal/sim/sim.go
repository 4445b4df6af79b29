// Package sim is a simulated GPU and training workload, for `batchfit demo`,
// tests and benchmarks. A simulated trial is a real child process (the
// batchfit binary in a hidden mode, see Main) whose GPU memory follows a
// simple law against a simulated card, so everything batchfit does around a
// trial — processes, exit codes, output, the adapter report, memory sampling —
// runs for real, and only the GPU is pretend.
package sim

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// Byte sizes used to describe workloads and cards.
const (
	KiB uint64 = 1 << 10
	MiB uint64 = 1 << 20
	GiB uint64 = 1 << 30
)

// Workload is the memory, speed and fault behaviour of a simulated training
// program. Zero fault thresholds are off.
//
// Memory law at batch size b, for one process:
//
//	part(b)      = PerSample*b + noise(b)        noise(b) in [0, Noise), from Seed
//	allocated(b) = Fixed + part(b)               torch.cuda.max_memory_allocated
//	reserved(b)  = Fixed + roundUp(part(b), Round)  torch.cuda.max_memory_reserved
//	device(b)    = Context + reserved(b)         what NVML sees for the process
//
// A trial fits when reserved(b) is at most the allocator's cap (see Fits).
type Workload struct {
	Name string

	Context   uint64 // CUDA context and non-allocator memory per process (outside torch's stats)
	Fixed     uint64 // weights, grads, optimizer state, workspaces
	PerSample uint64 // activations per sample
	Round     uint64 // allocator rounding of the batch-dependent part; 0 = none
	Noise     uint64 // deterministic pseudo-noise in [0, Noise) per size; must be < PerSample
	Seed      int64

	// Compute model: see StepSeconds. These are simulated seconds, reported
	// to batchfit; the child really sleeps only StepSleep per step.
	StepOverhead  time.Duration
	PerSampleTime time.Duration
	SaturateAt    int
	// StepSleep is the real time the child spends on each step, holding its
	// peak memory: long enough for a 20 Hz sampler to see it, short enough
	// that a demo search finishes in a few seconds.
	StepSleep time.Duration

	// Faults.
	LeakPerTrial uint64        // trial n (BATCHFIT_TRIAL) finds (n-1)*LeakPerTrial already used on its device
	CrashAt      int           // batch >= CrashAt: a Python traceback of a real bug, exit 1
	HangAt       int           // batch >= HangAt: sleep forever, holding memory
	HostOOMAt    int           // batch >= HostOOMAt: torch's DefaultCPUAllocator error, exit 1
	KillAt       int           // batch >= KillAt: SIGKILL itself, with no evidence of host OOM
	SizeLimitAt  int           // batch >= SizeLimitAt: "CUDA error: invalid configuration argument", exit 1
	SlowStart    time.Duration // real sleep before "initializing"
	// PastGate makes a program that reaches the GPU around batchfit's gate
	// (trial.Gate): a trial started early takes its memory at once.
	PastGate bool
	// FlakyP and FlakyBand make a flaky trainer, one that runs out of
	// memory at random near its limit: with probability FlakyP (drawn
	// afresh by every trial) a trial loses FlakyBand samples' worth of
	// memory (PerSample each) to fragmentation, so a size within FlakyBand
	// samples of the limit (exactly, without Noise and Round) fails with
	// torch's out-of-memory error. TrueMax is unchanged: the limit is where
	// a trial that loses nothing stops fitting.
	FlakyP    float64
	FlakyBand int

	// Lengths, when set, are the sequence lengths of the loader's batches
	// in its order, one a step, over and over, as a language model padded
	// to each batch's longest sequence sees them: a step's activations are
	// part(b) scaled by its length over the longest (the laws above are
	// the longest batch's), so a trial's peak is the longest batch's only
	// once a step ran it. A trial runs the longest first, as the adapter
	// does (BATCHFIT_WORST_CASE), and reports its batches' shapes.
	Lengths Lengths
	// Iterable makes the loader one that cannot be reordered (an iterable
	// dataset): a trial whose lengths vary runs on past its steps until
	// the longest length seen has not grown for BATCHFIT_SHAPE_PATIENCE
	// steps, as the adapter does.
	Iterable bool
}

// Card is a simulated GPU model. Dir is the state directory shared by the
// trial children and the Backend: each child registers its device memory
// there, so parallel trials on one device compete as on a real card. An empty
// Dir means no shared state: every child believes it is alone.
type Card struct {
	Name  string
	Total uint64 // bytes per device
	Count int    // devices; 0 means 1
	Dir   string
	// HoldPeak makes each child, before it exits, keep its memory on the
	// card until the Backend's ProcessMemory has listed it at that figure,
	// its peak. A sampler polling the Backend then sees every trial's
	// peak, however short the trial and however the scheduler runs the
	// two; without it a trial that does not sleep (StepSleep 0) can end
	// between two ticks. A child waits for as long as it takes, so set it
	// only where a Sampler watches every trial, and Dir with it.
	HoldPeak bool
}

func (c Card) devices() int {
	if c.Count <= 0 {
		return 1
	}
	return c.Count
}

// H100 is an 80 GiB card. Set Dir before use.
func H100() Card {
	return Card{Name: "NVIDIA H100 80GB HBM3 (simulated)", Total: 80 * GiB, Count: 1}
}

// ResNet50 is the demo default: the SimCLR workload of
// examples/simclr_resnet50 (ResNet-50, two 224x224 views per sample, fp16
// autocast, AdamW). Its numbers put the
// largest batch at 282 under a 24 GiB memory limit and at 952 on a whole
// 80 GiB card, as measured on real hardware for the 24 GiB case. The fastest
// size (samples per simulated second) is about 234.
func ResNet50() Workload {
	return Workload{
		Name:          "resnet50-simclr",
		Context:       512 * MiB,
		Fixed:         614 * MiB,
		PerSample:     88_900_000, // about 84.8 MiB
		Round:         2 * MiB,
		Noise:         1 * MiB,
		Seed:          282,
		StepOverhead:  25 * time.Millisecond,
		PerSampleTime: 700 * time.Microsecond,
		SaturateAt:    96,
		StepSleep:     20 * time.Millisecond,
	}
}

// Validate reports whether w is a workload the simulator can run.
func (w Workload) Validate() error {
	var errs []error
	if w.Noise > 0 && w.Noise >= w.PerSample {
		errs = append(errs, fmt.Errorf("noise %d must be smaller than per-sample %d, or peak memory would not grow with the batch", w.Noise, w.PerSample))
	}
	if w.StepOverhead < 0 || w.PerSampleTime < 0 || w.StepSleep < 0 || w.SlowStart < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if w.SaturateAt < 0 {
		errs = append(errs, errors.New("saturate-at must not be negative"))
	}
	if !(w.FlakyP >= 0 && w.FlakyP <= 1) {
		errs = append(errs, fmt.Errorf("flaky-p %g must be a probability, in [0, 1]", w.FlakyP))
	}
	for _, l := range w.Lengths {
		if l < 1 {
			errs = append(errs, fmt.Errorf("lengths must be positive, got %d", l))
			break
		}
	}
	if w.FlakyP > 0 && w.FlakyBand < 1 {
		errs = append(errs, errors.New("flaky-band must be at least 1 when flaky-p is set"))
	}
	for _, t := range []struct {
		name string
		v    int
	}{{"crash-at", w.CrashAt}, {"hang-at", w.HangAt}, {"host-oom-at", w.HostOOMAt}, {"kill-at", w.KillAt}, {"size-limit-at", w.SizeLimitAt}, {"flaky-band", w.FlakyBand}} {
		if t.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", t.name))
		}
	}
	return errors.Join(errs...)
}

// noise is a deterministic pseudo-random amount in [0, Noise) for one size,
// so that repeated trials at a size agree (as real ones nearly do) while
// neighbouring sizes do not lie on an exact line.
func (w Workload) noise(batch int) uint64 {
	if w.Noise == 0 {
		return 0
	}
	x := uint64(w.Seed) ^ (uint64(batch) * 0x9e3779b97f4a7c15)
	// splitmix64 finalizer
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x % w.Noise
}

// part is the batch-dependent allocation, saturating instead of wrapping for
// absurd sizes so that they simply never fit.
func (w Workload) part(batch int) uint64 {
	if batch <= 0 {
		return 0
	}
	return satAdd(satMul(w.PerSample, uint64(batch)), w.noise(batch))
}

// fragmentation is the memory a trial loses to fragmentation, given a
// uniform draw r in [0, 1): with probability FlakyP, FlakyBand samples'
// worth and up to half a sample more (how much varies from trial to trial,
// as fragments do), else none.
func (w Workload) fragmentation(r float64) uint64 {
	if r >= w.FlakyP {
		return 0
	}
	extra := uint64(r / w.FlakyP * float64(w.PerSample) / 2)
	return satAdd(satMul(uint64(w.FlakyBand), w.PerSample), extra)
}

// Peak is the ground truth of what one trial at batch uses: PyTorch's peak
// allocated and reserved bytes, and the process's device memory (Context +
// reserved). Memory leaked by earlier trials is not the trial's own and is
// not included.
func (w Workload) Peak(batch int) (allocated, reserved, device uint64) {
	p := w.part(batch)
	allocated = satAdd(w.Fixed, p)
	reserved = satAdd(w.Fixed, roundUp(p, w.Round))
	device = satAdd(w.Context, reserved)
	return allocated, reserved, device
}

// Fits is the exact rule the child applies: the trial runs when the
// allocator's reserved memory at its peak stays within capBytes. The
// caching allocator enforces a memory fraction on reserved bytes, and
// reserved is what it must get from the device.
func (w Workload) Fits(batch int, capBytes uint64) bool {
	_, reserved, _ := w.Peak(batch)
	return reserved <= capBytes
}

// Cap is the allocator's cap for a lone, first trial on card: the memory
// fraction limitFraction of the card (as torch computes it) where one is
// set, but never more than what is physically left after the CUDA context.
// limitFraction <= 0 or >= 1 means no limit.
func (w Workload) Cap(card Card, limitFraction float64) uint64 {
	return w.capFor(card.Total, limitFraction, 0, 0)
}

// capFor is the allocator cap given memory already used on the device by
// earlier trials' leaks and by other live processes.
func (w Workload) capFor(total uint64, fraction float64, leak, others uint64) uint64 {
	used := satAdd(satAdd(w.Context, leak), others)
	if used >= total {
		return 0
	}
	physical := total - used
	if fraction > 0 && fraction < 1 {
		if allowed := fractionBytes(fraction, total); allowed < physical {
			return allowed
		}
	}
	return physical
}

// fractionBytes is torch's setMemoryFraction arithmetic:
// static_cast<size_t>(fraction * static_cast<double>(device_total)).
func fractionBytes(fraction float64, total uint64) uint64 {
	return uint64(fraction * float64(total))
}

// Runs reports whether a lone first trial at batch exits ok under cap:
// it fits in memory and no fault threshold is reached. The thresholds all
// mean "at batch >= X", so the sizes that run form a prefix.
func (w Workload) runs(batch int, capBytes uint64) bool {
	for _, at := range []int{w.CrashAt, w.HangAt, w.HostOOMAt, w.KillAt, w.SizeLimitAt} {
		if at > 0 && batch >= at {
			return false
		}
	}
	return w.Fits(batch, capBytes)
}

// TrueMaxWholeProcess is TrueMax for a memory limit of limit bytes held by
// the whole process, as on a real card of that size: the CUDA context and
// the allocator's reserved memory together within it.
func (w Workload) TrueMaxWholeProcess(card Card, limit uint64, lo, hi, multipleOf int) int {
	if limit <= w.Context {
		return 0
	}
	return w.trueMax(lo, hi, multipleOf, min(limit-w.Context, w.Cap(card, 1)))
}

// TrueMax is the ground-truth answer of a search: the largest batch size B,
// a multiple of multipleOf in [min, max], at which a lone first trial on card
// (no leak, no other processes) exits ok — it fits in memory and reaches no
// fault threshold. It is 0 when no candidate runs. limitFraction is the
// memory fraction batchfit passes for --memory-limit (1 = the whole card).
// A search that meets a crash (CrashAt, KillAt) stops with an error rather
// than report this number; a hang reads as too large.
func (w Workload) TrueMax(card Card, limitFraction float64, min, max, multipleOf int) int {
	if multipleOf < 1 {
		multipleOf = 1
	}
	if min < 1 {
		min = 1
	}
	return w.trueMax(min, max, multipleOf, w.Cap(card, limitFraction))
}

// trueMax is the largest candidate that runs under capBytes (see TrueMax).
func (w Workload) trueMax(min, max, multipleOf int, capBytes uint64) int {
	lo := (min + multipleOf - 1) / multipleOf // first candidate index
	hi := max / multipleOf                    // last candidate index
	if lo > hi {
		return 0
	}
	if !w.runs(lo*multipleOf, capBytes) {
		return 0
	}
	// Invariant: candidate lo runs; every candidate above hi does not.
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if w.runs(mid*multipleOf, capBytes) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo * multipleOf
}

// declineSpan sets how quickly per-sample time grows past saturation: each
// further SaturateAt samples cost 1/declineSpan more per sample (cache and
// memory-bandwidth pressure), so throughput rises, flattens, then dips, and a
// fastest size exists below the largest.
const declineSpan = 16

// StepSeconds is the simulated time of one training step at batch:
//
//	StepOverhead + PerSampleTime * max(batch, SaturateAt) * (1 + max(0, batch-SaturateAt)/(16*SaturateAt))
//
// Below SaturateAt the GPU is not saturated and a step costs as much as one at
// SaturateAt, so samples per second rise linearly; above it they level off and
// slowly fall. The fastest size is near sqrt(16*SaturateAt*StepOverhead/PerSampleTime)
// (when that exceeds SaturateAt). SaturateAt 0 means a plain affine law.
func (w Workload) StepSeconds(batch int) float64 {
	b := float64(batch)
	s := float64(w.SaturateAt)
	per := w.PerSampleTime.Seconds()
	t := w.StepOverhead.Seconds()
	if w.SaturateAt <= 0 {
		return t + per*b
	}
	return t + per*math.Max(b, s)*(1+math.Max(0, b-s)/(declineSpan*s))
}

func roundUp(v, to uint64) uint64 {
	if to == 0 || v%to == 0 {
		return v
	}
	return satAdd(v-v%to, to)
}

func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}
