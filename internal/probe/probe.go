// Package probe turns a batch size into a finished, measured, classified
// trial: it substitutes the size into the user's command, prepares the
// trial's environment (batch size, adapter channel, memory limit, GPU
// pinning), runs it through the trial runner while the GPU sampler watches
// its process tree, and classifies the outcome. It implements search.Prober.
package probe

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hold"
	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/trial"
	"github.com/batchfit/batchfit/internal/units"
)

// Placeholder is replaced by the batch size in every argument of the command.
const Placeholder = "{}"

// Config says how to run trials of one command.
type Config struct {
	Command []string // argv with Placeholder where the size goes
	Env     []string // base environment (usually os.Environ())
	Dir     string
	Steps   int // BATCHFIT_STEPS: the adapter stops the program after so many steps; 0 lets it run to its end
	// WorstCaseOff sets BATCHFIT_WORST_CASE=0 (adapter.WorstCaseEnv): the
	// adapter leaves the batches in the program's order, where it would
	// run the loader's largest first, and never runs a trial whose shapes
	// vary past its steps.
	WorstCaseOff bool
	Timeout      time.Duration
	Grace        time.Duration
	LogDir       string // per-trial stdout, stderr and adapter report files

	// PythonPath, when set, puts the adapter's hook first on PYTHONPATH.
	PythonPath string
	// Framework reads the adapter's report and emulates MemoryLimit; nil
	// means adapter.None.
	Framework adapter.Framework
	// FrameworkVersion is the program's framework versions as
	// Framework.Version gives them ("jax 0.11.2, jaxlib 0.11.2"); "" when
	// unknown.
	FrameworkVersion string
	// MemoryLimit emulates a smaller card of that many bytes on a device of
	// DeviceTotal: the framework's allocator is capped where it has a
	// switch for it, and a trial it did not hold to the limit counts as oom
	// when its NVML peak exceeds it.
	MemoryLimit, DeviceTotal uint64
	// WholeProcess makes MemoryLimit hold for the whole process, as a real
	// card's memory does: the allocator's cap is the limit less what the
	// trials hold outside it (the CUDA context, kernels, library handles;
	// measured by NVML), and a trial whose NVML peak exceeds the limit
	// does not fit. Without it only the allocator is capped, as
	// PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction does.
	WholeProcess bool
	// OutsideGuess is what trials of this kind of process (GPU, driver,
	// framework) held outside their allocator in an earlier run: under
	// WholeProcess the first trials' cap is the limit less it, until a
	// trial here measured its own.
	OutsideGuess uint64

	// Executor runs each trial; nil runs it here, as a local process group.
	Executor Executor

	// Holder holds the rest of a GPU's memory for trials on a held card
	// (SetHeld); Devices are the GPUs it holds, by NVML index.
	Holder  hold.Holder
	Devices []gpu.Device

	// Sampler measures GPU memory of the trial's process tree; nil = none.
	Sampler *gpu.Sampler
	// ForeignLimit is how much memory other processes may gain on a
	// trial's GPU while it runs (gpu.Peak.Foreign) before the trial is
	// disturbed: it then runs again, at most MaxBusyReruns times, and the
	// search stops with a *GPUBusyError. 0 checks nothing.
	ForeignLimit uint64
	// Slots are the GPU sets trials may run on, one trial per slot at a
	// time; each is passed as CUDA_VISIBLE_DEVICES. Empty: one trial at a
	// time, no pinning.
	Slots [][]int

	// OnStart and OnDone report progress; they may be called from several
	// goroutines at once when trials run in parallel.
	OnStart func(n, size int, gpus []int)
	OnDone  func(t record.Trial)
	// Warn reports a problem that does not stop the search.
	Warn func(msg string)
	// OnSpawn is told each local trial's processes right after its leader
	// starts (trial.Spec.OnSpawn), to record them; nil records nothing.
	OnSpawn func(p trial.Process) (done func())
	// OnSubmit is told each trial job's name before a scheduler's executor
	// submits it (trial.Spec.OnSubmit), to record it; nil records nothing.
	OnSubmit func(name string) (submitted func(jobID string), done func())
}

// Executor runs one trial to its end: locally (trial.Run) or through a
// cluster scheduler. The watcher, when not nil, is told the trial's local
// PID; remote executors cannot sample NVML there and leave it unused.
type Executor interface {
	Run(ctx context.Context, spec trial.Spec, w trial.Watcher) (trial.Result, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, spec trial.Spec, w trial.Watcher) (trial.Result, error)

// Run calls f.
func (f ExecutorFunc) Run(ctx context.Context, spec trial.Spec, w trial.Watcher) (trial.Result, error) {
	return f(ctx, spec, w)
}

// Prober runs trials for the search and keeps their records.
type Prober struct {
	cfg Config

	mu     sync.Mutex
	n      int
	trials []record.Trial
	phase  string
	torch  string

	sources          []adapter.Source
	sourcesTruncated bool
	opened           []adapter.Source
	// outside is the most memory a trial held outside its framework's
	// allocator (NVML peak less the allocator's reserved peak), for
	// WholeProcess.
	outside uint64
	// measured says a trial here measured outside; until then
	// Config.OutsideGuess stands in for it.
	measured bool
	// cudaTotal is the device's total as CUDA reports it (the adapter's
	// device_total), for WholeProcess; 0 until a trial reported it.
	cudaTotal uint64
	// framework is the framework the first trial that reported one used
	// ("torch", "jax"; adapter.Summary.Framework), for limitEnv.
	framework string
	// held runs the trials on a held card (SetHeld).
	held bool
	// grows says jaxlib grows a bare fraction's pool (poolGrew).
	grows bool
	// spare is a trial started early for the next held round (probeInTurn),
	// or nil.
	spare *early
	// perProcess says NVML named a trial's processes (gpu.MethodProcess):
	// an early trial's memory can be seen (canStartEarly). noEarly says
	// one took memory before its turn: none starts early again.
	// multiProcess says a trial ran in several processes that reported
	// (torchrun's ranks): none starts early.
	perProcess, noEarly, multiProcess bool
}

var _ search.Prober = (*Prober)(nil)

// New returns a Prober for cfg.
func New(cfg Config) *Prober {
	if cfg.Executor == nil {
		cfg.Executor = ExecutorFunc(trial.Run)
	}
	if cfg.Framework == nil {
		cfg.Framework = adapter.None{}
	}
	return &Prober{cfg: cfg}
}

// SetPhase labels the trials started from now on (bracket, refine, confirm).
func (p *Prober) SetPhase(phase string) {
	p.mu.Lock()
	p.phase = phase
	p.mu.Unlock()
}

// NumberFrom makes n the next trial's number: a warm worker's search
// numbers its fresh trials among its own (worker.Prober), and the live
// display shows them under those numbers.
func (p *Prober) NumberFrom(n int) {
	p.mu.Lock()
	p.n = max(p.n, n-1)
	p.mu.Unlock()
}

// Primer is an Executor that can get ready for trials before the first
// one runs (forkserver.Executor preloads the program's packages): from a
// guess, or from the packages another process of the program reported.
type Primer interface {
	Prime(spec trial.Spec)
	Teach(spec trial.Spec, packages []string)
}

// Prime readies the executor for the trials to come, when it can: a warm
// worker's search runs its fresh trials only at the end, and their fork
// server is ready by then if it starts with the search.
func (p *Prober) Prime() {
	if pr, ok := p.cfg.Executor.(Primer); ok {
		pr.Prime(p.anySpec())
	}
}

// Teach tells the executor the packages the trials' program imports, as a
// warm worker running it reported them.
func (p *Prober) Teach(packages []string) {
	if pr, ok := p.cfg.Executor.(Primer); ok {
		pr.Teach(p.anySpec(), packages)
	}
}

// anySpec is a trial's spec as far as a fork server tells trials apart: the
// command, directory and environment; the size and the logs named here are
// never used.
func (p *Prober) anySpec() trial.Spec {
	return p.spec(0, 1, nil, special{}, p.allocatorCap(), filepath.Join(p.cfg.LogDir, "prime"))
}

// Trials returns the records of every finished trial, in start order.
func (p *Prober) Trials() []record.Trial {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.trials)
	// Parallel trials finish out of order; the record lists them as started.
	slices.SortFunc(out, func(a, b record.Trial) int { return a.N - b.N })
	return out
}

// TorchVersion is the torch version the adapter reported, if any.
func (p *Prober) TorchVersion() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.torch
}

// Sources are the source files the trials' programs loaded (see
// adapter.Event.Sources), each once; truncated says some were left out.
func (p *Prober) Sources() (sources []adapter.Source, truncated bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sources), p.sourcesTruncated
}

// Opened are the files the trials' programs opened for reading (see
// adapter.Event.Opened), each once, at most adapter.MaxOpened.
func (p *Prober) Opened() []adapter.Source {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.opened)
}

// Probe runs the request's sizes, in parallel over the slots when there are
// several, and returns their observations in the order given.
func (p *Prober) Probe(ctx context.Context, req search.Request) ([]search.Observation, error) {
	sizes := req.Sizes
	obs := make([]search.Observation, len(sizes))
	errs := make([]error, len(sizes))
	held := p.Holding()
	slots := p.cfg.Slots
	if held {
		slots = alone(slots)
	}
	if len(slots) == 0 {
		slots = [][]int{nil}
	}
	free := make(chan []int, len(slots))
	for _, s := range slots {
		free <- s
	}
	shared := &sharing{}
	// The last sizes may be the proof's re-checks, riding along the round.
	rechecks := req.Rechecks
	threads := 0
	if at := min(len(sizes), len(slots)); at > 1 {
		threads = max(1, runtime.NumCPU()/at)
	}
	if held && len(slots) == 1 && len(sizes) > 0 {
		return p.probeInTurn(ctx, sizes, rechecks, slots[0])
	}
	p.DropSpare()
	var wg sync.WaitGroup
	for i, size := range sizes {
		var gpus []int
		select {
		case gpus = <-free:
		case <-ctx.Done():
			gpus = <-free // still run it: it is classified canceled at once
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { free <- gpus }()
			obs[i], errs[i] = p.one(ctx, size, gpus, special{shared: shared, retry: i >= len(sizes)-rechecks, threads: threads, held: held})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return obs, err
		}
	}
	return obs, nil
}

// probeInTurn runs a held round's sizes one after the other on gpus, the
// next trial started early while each runs (see early.go). While the last
// runs, the first size starts early again for the next round: a proof's
// re-check runs its pair again, the fitting side first (the spare).
func (p *Prober) probeInTurn(ctx context.Context, sizes []int, rechecks int, gpus []int) ([]search.Observation, error) {
	obs := make([]search.Observation, len(sizes))
	next := p.takeSpare(sizes[0])
	for i, size := range sizes {
		sp := special{held: true, retry: i >= len(sizes)-rechecks, early: next}
		if next == nil {
			pl := p.plan(size, gpus, sp)
			sp.planned = &pl
		}
		next = nil
		if ctx.Err() == nil && p.canStartEarly() {
			// The next size; after the last, the first again (the spare).
			next = p.startEarly(ctx, sizes[(i+1)%len(sizes)], gpus, special{held: true})
		}
		sp.behind = next
		var err error
		obs[i], err = p.one(ctx, size, gpus, sp)
		if next != nil && next.dropped {
			next = nil
		}
		if err != nil {
			p.drop(next)
			return obs, err
		}
	}
	p.mu.Lock()
	p.spare = next
	p.mu.Unlock()
	return obs, nil
}

// SoakGrace is how long a soaked program has, after batchfit's SIGTERM at
// the soak's end, to write its report: the adapter writes it at once, but
// only between Python bytecodes, so after the step on the device ends.
const SoakGrace = 30 * time.Second

// SoakSteps is BATCHFIT_STEPS in a soak: more steps than any soak runs, so
// that the soak's time ends it. Not 0: programs read BATCHFIT_STEPS as their
// own step count (the examples do), and 0 steps is an error to them.
const SoakSteps = 1_000_000

// Soak runs size once in a fresh trial for d: the adapter does not stop it
// after the configured steps (BATCHFIT_STEPS=SoakSteps, BATCHFIT_SOAK=1), and a
// trial still running after d is stopped by batchfit and counts as having
// survived (ok, "soaked"), not as a timeout. It runs on the first slot.
func (p *Prober) Soak(ctx context.Context, size int, d time.Duration) (record.Trial, error) {
	p.DropSpare()
	var gpus []int
	if len(p.cfg.Slots) > 0 {
		gpus = p.cfg.Slots[0]
	}
	if _, err := p.one(ctx, size, gpus, special{soak: d, held: p.Holding()}); err != nil {
		return record.Trial{}, err
	}
	return p.last(size, record.PhaseSoak)
}

// special is how a trial departs from the search's: a soak of that length
// (see Soak), or a throughput measurement of that many steps (see
// Measure). The zero special is a search trial that runs alone.
type special struct {
	soak  time.Duration
	steps int
	// shared tells the search's trials that ran beside another on the
	// same GPUs; nil for a trial that runs alone.
	shared *sharing
	// retry marks a re-run of a size in a round of new ones (search.Request.Rechecks).
	retry bool
	// threads is the trial's share of the CPUs when others run at the
	// same time (adapter.CPUThreadsEnv); 0 when it runs alone.
	threads int
	// held runs the trial on a held card (SetHeld).
	held bool
	// early is the trial's own process, started early (startEarly), for
	// its first run; behind is the next trial's, waiting at its gate
	// while this one runs. planned, when set, is the first run's plan,
	// numbered before the trial behind it.
	early, behind *early
	planned       *planned
}

// Measure runs size once in a fresh trial of steps training steps, for its
// step times (throughput), and returns its record; it runs on the first
// slot.
func (p *Prober) Measure(ctx context.Context, size, steps int) (record.Trial, error) {
	p.DropSpare()
	var gpus []int
	if len(p.cfg.Slots) > 0 {
		gpus = p.cfg.Slots[0]
	}
	if _, err := p.one(ctx, size, gpus, special{steps: steps, held: p.Holding()}); err != nil {
		return record.Trial{}, err
	}
	return p.last(size, record.PhaseThroughput)
}

// last is the newest record of a trial at size in phase.
func (p *Prober) last(size int, phase string) (record.Trial, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.trials) - 1; i >= 0; i-- {
		if t := p.trials[i]; t.Size == size && t.Phase == phase {
			return t, nil
		}
	}
	return record.Trial{}, fmt.Errorf("trial at batch size %d (%s) left no record", size, phase)
}

// MaxBusyReruns is how often a trial disturbed by another process is run
// again before the search gives up: a job that came and went is waited out,
// one that stays is named.
const MaxBusyReruns = 2

// GPUBusyError is a search stopped because other processes kept taking
// memory on the GPU while its trials ran: any answer would be low.
type GPUBusyError struct {
	Size    int    // the batch size whose trials were disturbed
	Trials  int    // how many in a row
	Foreign uint64 // the most the others took, in the last one
	PIDs    []int  // who took it
}

func (e *GPUBusyError) Error() string {
	procs := make([]string, len(e.PIDs))
	for i, pid := range e.PIDs {
		procs[i] = fmt.Sprintf("%d (%s)", pid, procfs.Name(pid))
	}
	return fmt.Sprintf("the GPU is busy: other processes took %s on it during each of %d trials at batch size %d (pid %s)",
		units.Bytes(e.Foreign), e.Trials, e.Size, strings.Join(procs, ", "))
}

// Hint says what to do about it.
func (e *GPUBusyError) Hint() string {
	return "wait for the other processes to finish, or run on another GPU (--gpus)"
}

// one runs a single trial at size on gpus, again in a fresh process when
// another process took memory on its GPU while it ran; sp makes it a soak
// or a throughput measurement.
func (p *Prober) one(ctx context.Context, size int, gpus []int, sp special) (search.Observation, error) {
	recapped, regrown := false, false
	for runs := 1; ; runs++ {
		guessed := !sp.held && p.guessing() // a held trial has no cap to guess
		own := sp.early
		o, t, again, err := p.attempt(ctx, size, gpus, sp)
		sp.early, sp.planned = nil, nil // its first run only
		if err != nil && own != nil && !own.ran {
			p.drop(own) // the hold failed before its gate opened
		}
		if err == nil && ctx.Err() == nil && again.behind > 0 {
			p.disturbed(t.N, size, sp.behind, again.behind)
			runs--
			continue
		}
		if err == nil && ctx.Err() == nil && (again.poolGrew || again.recap || t.Busy) {
			// It runs again before the trial behind it: that one starts
			// afresh after it, numbered in order.
			p.drop(sp.behind)
		}
		if err == nil && guessed && o.Outcome.TooLarge() && p.Outside() < p.cfg.OutsideGuess && !recapped && ctx.Err() == nil {
			// Capped from an earlier run's figure, which left this
			// program less than its own measurement does: run it again
			// without the guess.
			recapped, runs = true, runs-1
			p.dropGuess()
			p.warn(fmt.Sprintf("trial %d at batch size %d: its allocator was capped at %s from an earlier run's figures; this program holds less outside it, so it runs again capped at %s",
				t.N, size, units.Bytes(t.AllocatorCap), units.Bytes(p.allocatorCap())))
			continue
		}
		if err == nil && again.poolGrew && !regrown && ctx.Err() == nil {
			// Once: every trial from now on gets START-CAP.
			regrown, runs = true, runs-1
			p.growPools()
			p.warn(fmt.Sprintf("trial %d at batch size %d: XLA's pool grew to %s, past the %s it was given: this jaxlib grows a bare memory fraction's pool into the whole GPU, so trials now get START-CAP fractions, growing only as far as the card would let them; running it again",
				t.N, size, units.Bytes(max(t.PoolLimit, t.Allocated)), units.Bytes(p.namedPool(t.AllocatorCap))))
			continue
		}
		if err == nil && again.recap && !recapped && ctx.Err() == nil {
			// Once: the cap this trial measured is what a real card leaves.
			recapped, runs = true, runs-1
			p.warn(fmt.Sprintf("trial %d at batch size %d: its allocator was allowed %s, but the process also held %s outside it; running it again with the allocator capped at %s",
				t.N, size, units.Bytes(t.AllocatorCap), units.Bytes(t.Device-t.Reserved), units.Bytes(p.allocatorCap())))
			continue
		}
		if err != nil || !t.Busy || ctx.Err() != nil {
			return o, err
		}
		if runs > MaxBusyReruns {
			return o, &GPUBusyError{Size: size, Trials: runs, Foreign: t.Foreign, PIDs: t.ForeignPIDs}
		}
		p.warn(fmt.Sprintf("trial %d at batch size %d: other processes took %s on its GPU while it ran; running it again",
			t.N, size, units.Bytes(t.Foreign)))
	}
}

// rerun says why a trial that ran is to run again.
type rerun struct {
	// recap: it did not fit only because its allocator was allowed more
	// than the card leaves it (see holdToLimit).
	recap bool
	// poolGrew: XLA's pool grew past the bare fraction it was given.
	poolGrew bool
	// behind: the trial started early behind it held this much of the
	// GPU while it ran.
	behind uint64
}

// attempt runs one trial and records it, and says whether it is to run
// again.
func (p *Prober) attempt(ctx context.Context, size int, gpus []int, sp special) (_ search.Observation, _ record.Trial, _ rerun, _ error) {
	var pl planned
	switch {
	case sp.early != nil:
		pl = sp.early.plan
	case sp.planned != nil:
		pl = *sp.planned
	default:
		pl = p.plan(size, gpus, sp)
	}
	n, phase, base, allocCap, spec := pl.n, pl.phase, pl.base, pl.allocCap, pl.spec
	res, peak, bound, shared, err := p.launch(ctx, n, size, gpus, sp, spec)
	beside := sp.behind != nil && !sp.behind.dropped // a trial started early behind it
	took := sp.behind.tookMemory()
	var logErr *trial.LogError
	if errors.As(err, &logErr) {
		err = nil // the trial ran: classified below, then the search stops
	}
	if err != nil {
		return search.Observation{}, record.Trial{}, rerun{}, fmt.Errorf("start trial %d at batch size %d: %w", n, size, err)
	}
	device := perGPUPeak(peak, gpus)

	j := p.judge(n, res, logErr, base, spec.Env, sp, device, perGPUPeak(bound, gpus), allocCap)
	c, sum, peaks := j.result, j.sum, j.peaks

	t := record.Trial{
		N:            n,
		Size:         size,
		Outcome:      c.Outcome,
		Reason:       c.Reason,
		Seconds:      res.Duration.Seconds(),
		ExitCode:     res.ExitCode,
		Phase:        phase,
		Retry:        sp.retry || phase == string(search.PhaseRecheck) || phase == string(search.PhaseConfirm),
		GPUs:         gpus,
		Allocated:    peaks.Allocated,
		Reserved:     peaks.Reserved,
		Device:       device,
		PoolLimit:    peaks.Limit,
		Foreign:      peak.Foreign,
		ForeignPIDs:  peak.ForeignPIDs,
		Busy:         p.cfg.ForeignLimit > 0 && peak.Foreign > p.cfg.ForeignLimit,
		StepTimes:    sum.StepTimes,
		Steps:        sum.Steps,
		StepPeaks:    sum.StepPeaks,
		Rising:       rising(sum),
		Batches:      sum.Batches,
		Plan:         sum.Plan,
		Forked:       res.Forked,
		SizeRead:     sum.SizeRead,
		AllocatorCap: capOf(allocCap, p.cfg.MemoryLimit),
		Held:         sp.held,
		StartedEarly: sp.early != nil,
		BesideEarly:  beside,
		SharedGPU:    shared,
		Stdout:       spec.StdoutPath,
		Stderr:       spec.StderrPath,
	}
	if took > 0 {
		// Not believed, as a trial that a stranger's memory disturbed.
		t.Busy, t.Foreign = true, max(t.Foreign, took)
	}
	p.noteProcesses(peak, sum)
	t.Signal, t.Tail = exitDetails(res, c.Outcome)
	failure := FailureOf(c.Outcome, sum, res.Output())
	t.OOM = oomFigures(failure)
	p.keep(t, sum)
	o := search.Observation{
		Size:    size,
		Outcome: c.Outcome,
		Memory:  search.Memory{Allocated: peaks.Allocated, Reserved: peaks.Reserved, Device: device, Limit: p.poolLimit(peaks, allocCap, sum)},
		Failure: failure,
	}
	if j.lost != nil {
		return o, t, rerun{}, &OutputError{N: n, Size: size, Err: j.lost}
	}
	return o, t, rerun{recap: j.recap, poolGrew: p.poolGrew(spec.Env, t), behind: took}, nil
}

// planned is a trial numbered and specified, not yet run.
type planned struct {
	n        int
	phase    string
	base     string // its log files' path, less the extension
	allocCap uint64
	spec     trial.Spec
}

// plan numbers the next trial, at size on gpus, and specifies it.
func (p *Prober) plan(size int, gpus []int, sp special) planned {
	p.mu.Lock()
	p.n++
	pl := planned{n: p.n, phase: p.phase}
	p.mu.Unlock()
	pl.base = filepath.Join(p.cfg.LogDir, fmt.Sprintf("trial-%03d-b%d", pl.n, size))
	pl.allocCap = p.allocatorCap()
	if sp.held {
		pl.allocCap = 0 // the held card itself is the limit
	}
	pl.spec = p.spec(pl.n, size, gpus, sp, pl.allocCap, pl.base)
	switch {
	case sp.soak > 0:
		pl.phase = record.PhaseSoak
	case sp.steps > 0:
		pl.phase = record.PhaseThroughput
	}
	return pl
}

// launch runs trial n's spec on gpus to its end, on a held card holding
// them first, and tells OnStart as it starts. shared says another trial of
// the search ran beside it on the same GPUs; bound is then, where NVML
// listed none of the trial's processes, the rise of the GPU's used memory
// while it ran, its neighbours' included: no figure of the trial's own
// (peak has none), but more than it used. An error is one of the hold, or
// the executor's.
func (p *Prober) launch(ctx context.Context, n, size int, gpus []int, sp special, spec trial.Spec) (_ trial.Result, _ gpu.Peak, bound gpu.Peak, shared bool, _ error) {
	if sp.held {
		release, err := p.holdFor(gpus)
		if err != nil {
			return trial.Result{}, gpu.Peak{}, gpu.Peak{}, false, fmt.Errorf("trial %d at batch size %d: %w", n, size, err)
		}
		defer release()
	}
	if p.cfg.OnStart != nil {
		p.cfg.OnStart(n, size, gpus)
	}
	beside, ended := sp.shared.start(gpus)
	var res trial.Result
	var peak gpu.Peak
	var err error
	if sp.early != nil {
		res, peak, err = sp.early.run()
	} else {
		res, peak, err = p.watched(ctx, spec, gpus, sp.held)
	}
	ended()
	bound = peak
	if beside.Load() && peak.Method == gpu.MethodDeviceDelta {
		// The GPU's used memory rose by the trials beside it too: a trial
		// that ended before NVML listed its processes has no figure of its
		// own, rather than its neighbours' (which would also make its
		// memory outside the allocator look large, and cap the next ones
		// low). The rise still bounds what it used: the limit is held
		// against it.
		peak = gpu.Peak{Samples: peak.Samples}
	}
	return res, peak, bound, beside.Load(), err
}

// judgement is what a finished trial's output, its adapter's report and
// its memory figures say of it.
type judgement struct {
	result classify.Result
	recap  bool // the outcome came from the limit held against its peaks
	sum    adapter.Summary
	peaks  adapter.Peaks
	// lost is the log or report that could not be written whole, if any
	// (a *trial.LogError or an *adapter.ReportError).
	lost error
}

// judge classifies trial n from its result, the report at base, and its
// peak on the device (per GPU), against the limit it ran under: the limit
// is held against bound, which is device, or more where the trial's own
// figure is unknown (launch).
func (p *Prober) judge(n int, res trial.Result, logErr *trial.LogError, base string, env []string, sp special, device, bound, allocCap uint64) judgement {
	soak := sp.soak
	events, bad, rerr := adapter.Read(base + ".report.jsonl")
	var cut *adapter.ReportError
	errors.As(rerr, &cut)
	lost, lostReport := lostOutput(res, logErr, cut)
	if lost == nil && (rerr != nil || bad > 0) {
		p.warn(fmt.Sprintf("trial %d: the adapter's report was unreadable (%d bad lines); classified from exit status and output", n, bad))
	}
	sum := adapter.Summarize(events)
	c := classifyTrial(res, events, sum, soak)
	peaks := p.cfg.Framework.Peaks(sum)
	p.noteDevice(peaks, device, sum.DeviceTotal, sum.Framework)
	recap := false
	if !sp.held {
		// On a held card the card itself held the trial to the limit.
		c, recap = p.holdToLimit(c, peaks, sum, max(device, bound), allocCap)
	}
	if why := adapter.CapNotHeld(env, sum); why != "" && p.cfg.MemoryLimit > 0 && !sp.held {
		// Measured against a limit it did not keep: no outcome to believe.
		// (Without --memory-limit a fraction is the user's own business.)
		c = classify.Result{Outcome: classify.Crash, Reason: why}
	}
	if lostReport {
		// Without its report the trial may have hidden an OOM it caught:
		// no outcome to believe, as above.
		c = classify.Result{Outcome: classify.Crash, Reason: lost.Error()}
	}
	return judgement{result: c, recap: recap, sum: sum, peaks: peaks, lost: lost}
}

// OutputError is a trial whose log or adapter report could not be written
// whole: a full disk, a quota, a folder gone. The trial's outcome came from
// its output as batchfit received it, but the search stops all the same: a
// lost report may have been the only sign of an OOM the program caught, and
// the next trials' logs would be lost too.
type OutputError struct {
	N, Size int
	Err     error // a *trial.LogError or an *adapter.ReportError
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("trial %d at batch size %d: %v", e.N, e.Size, e.Err)
}

func (e *OutputError) Unwrap() error { return e.Err }

// Hint says where to make room, or to write elsewhere.
func (e *OutputError) Hint() string {
	var path string
	var le *trial.LogError
	var re *adapter.ReportError
	switch {
	case errors.As(e.Err, &le):
		path = le.Path
	case errors.As(e.Err, &re):
		path = re.Path
	}
	dir := filepath.Dir(path)
	if errors.Is(e.Err, syscall.ENOSPC) || errors.Is(e.Err, syscall.EDQUOT) || errors.Is(e.Err, adapter.ErrCutShort) {
		return fmt.Sprintf("free space on %s or give --log-dir elsewhere", dir)
	}
	return fmt.Sprintf("make %s writable or give --log-dir elsewhere", dir)
}

// lostOutput is what a trial could not write of its output, when that
// stops the search: its log (logErr), its report as the adapter said on
// stderr, or its report cut short (cut), unless batchfit or a signal
// stopped the trial, which explains a report cut off and decides the
// outcome without it. report says the report was lost, which leaves the
// trial without an outcome; a lost log does not, as the outcome comes from
// the output as batchfit received it. A canceled trial loses nothing that
// counts: the search ends there anyway.
func lostOutput(res trial.Result, logErr *trial.LogError, cut *adapter.ReportError) (lost error, report bool) {
	switch said := res.Matches.ReportLost(); {
	case res.Canceled:
		return nil, false
	case said != nil:
		return said, true
	case cut != nil && res.Signal == 0 && !res.TimedOut:
		return cut, true
	case logErr != nil:
		return logErr, false
	}
	return nil, false
}

// watched runs spec through the executor while the sampler, if any,
// watches its process tree on gpus, and returns its result and GPU peak.
func (p *Prober) watched(ctx context.Context, spec trial.Spec, gpus []int, plain bool) (trial.Result, gpu.Peak, error) {
	var watch *gpu.Watch
	var watcher trial.Watcher
	if p.cfg.Sampler != nil {
		watcher = watchFunc(func(pid int) func() {
			watch = p.cfg.Sampler.Start(pid, gpus)
			return func() {}
		})
	}
	executor := p.cfg.Executor
	if plain {
		executor = ExecutorFunc(trial.Run)
	}
	res, err := executor.Run(ctx, spec, watcher)
	var peak gpu.Peak
	if watch != nil {
		peak = watch.Stop()
	}
	return res, peak, err
}

// spec is trial n's at size: its command, environment, limits (the
// allocator capped at allocCap) and logs (named from base). A soak runs for
// its time with SoakSteps steps; a throughput measurement its steps.
func (p *Prober) spec(n, size int, gpus []int, sp special, allocCap uint64, base string) trial.Spec {
	steps, timeout, grace := p.cfg.Steps, p.cfg.Timeout, p.cfg.Grace
	switch {
	case sp.soak > 0:
		steps, timeout, grace = SoakSteps, sp.soak, SoakGrace
	case sp.steps > 0:
		steps = sp.steps
	}
	env := p.env(n, size, steps, sp.soak > 0, gpus, allocCap, base+".report.jsonl")
	if sp.threads > 0 {
		env = append(adapter.Without(env, adapter.CPUThreadsEnv), adapter.CPUThreadsEnv+"="+strconv.Itoa(sp.threads))
	}
	return trial.Spec{
		Argv:       Substitute(p.cfg.Command, size),
		Env:        env,
		Dir:        p.cfg.Dir,
		Timeout:    timeout,
		Grace:      grace,
		StdoutPath: base + ".out",
		StderrPath: base + ".err",
		OnSpawn:    p.cfg.OnSpawn,
		OnSubmit:   p.cfg.OnSubmit,
	}
}

// rising is how much the trial's peak still grew at its last step, judged
// after the batches meant to raise it (record.RisingAfter).
func rising(sum adapter.Summary) uint64 {
	growth, _ := record.RisingAfter(sum.StepPeaks, record.SettleFrom(sum.Batches))
	return growth
}

// exitDetails returns the signal that ended a trial ("" when none) and, for
// a crash, its stderr tail for the hint.
func exitDetails(res trial.Result, outcome classify.Outcome) (signal, tail string) {
	if res.Signal != 0 {
		signal = res.Signal.String()
	}
	if outcome == classify.Crash {
		tail = string(res.StderrTail)
	}
	return signal, tail
}

// classifyTrial says how a trial ended, from its exit, its output and the
// adapter's report. A soak that batchfit ended at its time survived.
func classifyTrial(res trial.Result, events []adapter.Event, sum adapter.Summary, soak time.Duration) classify.Result {
	in := classify.Input{
		ExitCode:        res.ExitCode,
		Signal:          res.Signal,
		TimedOut:        res.TimedOut,
		Canceled:        res.Canceled,
		HostOOMEvidence: res.HostOOMEvidence,
		Output:          res.Output(),
		Matches:         res.Matches,
	}
	if len(events) > 0 {
		in.Event = &adapter.Event{Event: "exit", OOM: sum.OOM, Exception: sum.Exception, OOMsCaught: sum.OOMsCaught, Stopped: sum.Stopped, Steps: sum.Steps}
	}
	if soak > 0 && res.TimedOut {
		return classify.Result{Outcome: classify.OK, Reason: fmt.Sprintf("soaked: stopped by batchfit after %s", soak)}
	}
	return classify.Classify(in)
}

// keep records a finished trial, with what its report says of the
// program, and tells OnDone.
func (p *Prober) keep(t record.Trial, sum adapter.Summary) {
	p.mu.Lock()
	p.trials = append(p.trials, t)
	if sum.Torch != "" {
		p.torch = sum.Torch
	}
	p.sources, p.sourcesTruncated = adapter.MergeSources(p.sources, sum.Sources, p.sourcesTruncated || sum.SourcesTruncated)
	p.opened = adapter.MergeOpened(p.opened, sum.Opened)
	p.mu.Unlock()
	if p.cfg.OnDone != nil {
		p.cfg.OnDone(t)
	}
}

// env builds the trial's environment: the base, then batchfit's variables,
// which win over inherited ones of the same name; the adapter's PYTHONPATH
// and report file go through adapter.Env, as for the warm worker.
func (p *Prober) env(n, size, steps int, soak bool, gpus []int, allocCap uint64, reportPath string) []string {
	set := map[string]string{
		"BATCHFIT_BATCH_SIZE": strconv.Itoa(size),
		"BATCHFIT_STEPS":      strconv.Itoa(steps),
		"BATCHFIT_TRIAL":      strconv.Itoa(n),
		adapter.WorstCaseEnv:  "1",
	}
	if p.cfg.WorstCaseOff {
		set[adapter.WorstCaseEnv] = "0"
	}
	if steps == 0 {
		// --steps 0: the program's own end. Unset rather than 0, which a
		// program that takes its step count from BATCHFIT_STEPS rejects.
		set["BATCHFIT_STEPS"] = ""
	}
	if soak {
		// The adapter writes its report when batchfit stops the soak.
		set[adapter.SoakEnv] = "1"
	}
	env := make([]string, 0, len(p.cfg.Env)+len(set)+2)
	for _, kv := range p.cfg.Env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := set[k]; !ours {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	env = p.limitEnv(PinEnv(env, gpus), allocCap)
	return adapter.Env(env, p.cfg.PythonPath, reportPath)
}

// PinEnv is env with only gpus visible to CUDA, as NVML numbers them
// (inherited settings of both variables give way); env itself when gpus is
// nil. A fresh trial and a warm worker are pinned alike.
func PinEnv(env []string, gpus []int) []string {
	if gpus == nil {
		return env
	}
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = strconv.Itoa(g)
	}
	// NVML numbers GPUs by PCI bus; CUDA fastest-first unless told.
	return append(adapter.Without(env, "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"),
		"CUDA_VISIBLE_DEVICES="+strings.Join(ids, ","), "CUDA_DEVICE_ORDER=PCI_BUS_ID")
}

func (p *Prober) warn(msg string) {
	if p.cfg.Warn != nil {
		p.cfg.Warn(msg)
	}
}

// Substitute replaces every Placeholder in argv with size.
func Substitute(argv []string, size int) []string {
	s := strconv.Itoa(size)
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, Placeholder, s)
	}
	return out
}

type watchFunc func(pid int) func()

func (f watchFunc) Watch(pid int) func() { return f(pid) }

// perGPUPeak is the memory figure of a trial: for a trial spanning several
// GPUs the batch size is per GPU, so the largest per-GPU peak counts.
func perGPUPeak(peak gpu.Peak, gpus []int) uint64 {
	if len(gpus) <= 1 || len(peak.PerDevice) == 0 {
		return peak.Bytes
	}
	var m uint64
	for _, b := range peak.PerDevice {
		m = max(m, b)
	}
	return m
}

// Close releases nothing: every trial's processes are gone when it returns.
// It lets callers treat fresh and warm-worker probers alike.
func (p *Prober) Close() error {
	p.DropSpare()
	return nil
}
