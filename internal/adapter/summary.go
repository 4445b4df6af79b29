package adapter

import "slices"

// Summary is what a trial's exit events say, folded over every process that
// reported (each torchrun rank, spawned dataloader workers).
type Summary struct {
	// Events is how many exit events were read; zero means the hook never
	// reached a normal interpreter exit (or the command is not Python).
	Events int
	// OOM is set when any process ended on a GPU out-of-memory error.
	OOM bool
	// OOMsCaught is how many out-of-memory errors the processes caught and
	// survived, summed over them; OOMRequests are the first refused
	// allocations they reported (at most MaxOOMRequests).
	OOMsCaught  int
	OOMRequests []OOMRequest
	// Exception is the exception that ended the first process that ended on
	// an OOM, or else on any exception, rank 0 first.
	Exception string
	// MaxAllocated and MaxReserved are the largest peaks of any one process
	// (the max over ranks), in bytes; zero when CUDA was not used.
	// MaxAllocated is the framework's own peak: torch's, JAX's or
	// TensorFlow's (see Framework).
	MaxAllocated, MaxReserved uint64
	// MaxMemoryFraction is the largest allocator cap any process reported
	// (Event.MemoryFraction), 0 when none did.
	MaxMemoryFraction float64
	// Framework is the framework that reported memory ("torch", "jax",
	// "tensorflow"), that of the process with the largest peak; "" when none
	// did.
	Framework string
	// MemoryLimit is the largest pool limit the framework reported (JAX's
	// bytes_limit, TensorFlow's logical device limit) and MaxPool the
	// largest pool it held (JAX's pool_bytes), in bytes; zero when unknown.
	MemoryLimit, MaxPool uint64
	// Torch is the torch version, Device and DeviceTotal (bytes) the GPU of
	// the process with the largest allocated peak.
	Torch       string
	Device      string
	DeviceTotal uint64
	// Ranks is how many distinct ranks reported.
	Ranks int
	// Steps, StepTimes (seconds between consecutive optimizer steps) and
	// StepPeaks (bytes after each step) are those of rank 0, or of the first
	// process that stepped at all.
	Steps     int
	StepTimes []float64
	StepPeaks []uint64
	// Batches are the batch shapes of the same process (its steps'
	// shapes align with StepPeaks), else of the first that reported any.
	Batches *Batches
	// Stopped is set when the adapter ended any process after its steps.
	Stopped bool
	// Plan is the largest JAX step plan any process reported (Event.Plan),
	// Stopped set when the adapter ended that process on it; nil when none.
	Plan *XLAPlan
	// SizeRead is set when any process took its batch size from
	// batchfit.batch_size() (Event.SizeRead).
	SizeRead bool
	// Sources are the source files every process loaded (see
	// Event.Sources), each path once, at most MaxSources; SourcesTruncated
	// says some were left out.
	Sources          []Source
	SourcesTruncated bool
	// Opened are the files every process opened for reading (see
	// Event.Opened), each path once, at most MaxOpened.
	Opened []Source
}

// MaxOOMRequests bounds Summary.OOMRequests.
const MaxOOMRequests = 20

// Summarize folds a trial's events (from Read) into one Summary. Only "exit"
// events count.
func Summarize(events []Event) Summary {
	var s Summary
	ranks := map[int]bool{}
	var kept *Event     // whose exception is reported
	var stepper *Event  // whose step figures are reported
	var deviceOf *Event // whose device is reported
	var frameworkOf *Event
	for i := range events {
		ev := &events[i]
		if ev.Event != "exit" {
			continue
		}
		s.Events++
		ranks[ev.Rank] = true
		s.OOM = s.OOM || ev.OOM
		s.Stopped = s.Stopped || ev.Stopped
		if p := ev.Plan; p != nil && (s.Plan == nil || p.InUse+p.Need > s.Plan.InUse+s.Plan.Need) {
			plan := *p
			plan.Stopped = ev.PlanStopped
			s.Plan = &plan
		}
		s.SizeRead = s.SizeRead || ev.SizeRead
		if ev.Exception != "" && (kept == nil || betterException(ev, kept)) {
			kept = ev
		}
		if s.Torch == "" {
			s.Torch = ev.Torch
		}
		if ev.Device != "" && (deviceOf == nil || ev.MaxAllocated > deviceOf.MaxAllocated) {
			deviceOf = ev
		}
		s.MaxAllocated = max(s.MaxAllocated, ev.MaxAllocated)
		s.MaxReserved = max(s.MaxReserved, ev.MaxReserved)
		s.MaxMemoryFraction = max(s.MaxMemoryFraction, ev.MemoryFraction)
		if ev.Framework != "" && (frameworkOf == nil || ev.MaxAllocated > frameworkOf.MaxAllocated) {
			frameworkOf = ev
		}
		s.MemoryLimit = max(s.MemoryLimit, ev.MemoryLimit)
		for _, d := range ev.Devices {
			s.MaxPool = max(s.MaxPool, d.Pool)
		}
		s.OOMsCaught += ev.OOMsCaught
		s.OOMRequests = append(s.OOMRequests, ev.OOMRequests[:min(len(ev.OOMRequests), MaxOOMRequests-len(s.OOMRequests))]...)
		s.Sources, s.SourcesTruncated = MergeSources(s.Sources, ev.Sources, s.SourcesTruncated || ev.SourcesTruncated)
		s.Opened = MergeOpened(s.Opened, ev.Opened)
		if ev.Steps > 0 && (stepper == nil || (ev.Rank == 0 && stepper.Rank != 0)) {
			stepper = ev
		}
	}
	s.Ranks = len(ranks)
	if kept != nil {
		s.Exception = kept.Exception
	}
	if deviceOf != nil {
		s.Device, s.DeviceTotal = deviceOf.Device, deviceOf.DeviceTotal
	}
	if frameworkOf != nil {
		s.Framework = frameworkOf.Framework
	}
	if stepper != nil {
		s.Steps, s.StepTimes, s.StepPeaks, s.Batches = stepper.Steps, stepper.StepTimes, stepper.StepPeaks, stepper.Batches
	}
	if s.Batches == nil {
		for i := range events {
			if ev := &events[i]; ev.Event == "exit" && ev.Batches != nil {
				s.Batches = ev.Batches
				break
			}
		}
	}
	return s
}

// betterException says whether ev's exception explains the trial better than
// kept's: an OOM beats any other exception, then rank 0 beats other ranks,
// then the first one read wins.
func betterException(ev, kept *Event) bool {
	if ev.OOM != kept.OOM {
		return ev.OOM
	}
	return ev.Rank == 0 && kept.Rank != 0
}

// MergeSources adds the sources in more to have, each path once (the first
// report of it wins), up to MaxSources; truncated comes back set when any
// were left out.
func MergeSources(have, more []Source, truncated bool) ([]Source, bool) {
	have, left := merge(have, more, MaxSources)
	return have, truncated || left
}

// MergeOpened adds the opened files in more to have, each path once (the
// first report of it wins), up to MaxOpened; the rest are left out, as the
// data the program streams (see MaxOpened).
func MergeOpened(have, more []Source) []Source {
	have, _ = merge(have, more, MaxOpened)
	return have
}

// merge adds the files in more to have, each path once, up to limit, and
// says whether some were left out.
func merge(have, more []Source, limit int) ([]Source, bool) {
	for _, src := range more {
		if slices.ContainsFunc(have, func(h Source) bool { return h.Path == src.Path }) {
			continue
		}
		if len(have) >= limit {
			return have, true
		}
		have = append(have, src)
	}
	return have, false
}
