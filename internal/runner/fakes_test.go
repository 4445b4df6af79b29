package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/gpugroup"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/store"
	"github.com/batchfit/batchfit/internal/trial"
)

// fakeTrainer is a workload played by fakeExecutor: memory grows by
// perSample a sample over fixed, and a size whose allocation passes limit
// runs out of memory, the way torch reports it.
type fakeTrainer struct {
	fixed, perSample, limit uint64
	// crashAbove, when set, makes sizes above it fail with a bug.
	crashAbove int
	// hangFrom, when set, makes sizes from it on run past the timeout.
	hangFrom int
	// noFigures reports no memory and no step times, as a program without
	// the adapter on a machine without NVML.
	noFigures bool
	// noMemory reports step times but no memory, as PyTorch on a CPU.
	noMemory bool
	// stepPerSample adds to a step's 0.1 s: the step time of a workload
	// whose steps do more work at larger sizes.
	stepPerSample float64
	// block, when set, is closed by the trial at blockAt and then waits
	// for the context: a trial to cancel.
	blockAt int
	block   chan struct{}
	// sources are the files the program loaded, and opened the files it
	// opened for reading, as the hook reports them.
	sources, opened []string
	// rising reports step peaks that still grow at the last step.
	rising bool
	// worstSteps, when set, reports batches whose shapes vary, the
	// loader's largest run first in so many of the three steps.
	worstSteps int
	// sizeRead reports that the program took its size from
	// batchfit.batch_size(), in every trial, failed ones too.
	sizeRead bool
	// soakFits, when set, is the largest size a soak survives; a larger
	// one runs out of memory after soakSteps steps. A soak that survives
	// runs until batchfit stops it.
	soakFits, soakSteps int
}

func (t fakeTrainer) fits(size int) bool { return t.fixed+uint64(size)*t.perSample <= t.limit }

// truth is the largest size in [1, max] that fits.
func (t fakeTrainer) truth(max int) int {
	n := 0
	for s := 1; s <= max && t.fits(s); s++ {
		n = s
	}
	return n
}

// fakeExecutor runs no process: it reads the batch size from argv[1] and
// answers as trainer would, writing the adapter's report like the hook.
type fakeExecutor struct {
	trainer fakeTrainer
	mu      sync.Mutex
	sizes   []int
	envs    [][]string
}

var _ probe.Executor = (*fakeExecutor)(nil)

func (e *fakeExecutor) Run(ctx context.Context, spec trial.Spec, w trial.Watcher) (trial.Result, error) {
	// The size is the last argument, or, for a command without {}, the
	// environment's.
	size, err := strconv.Atoi(spec.Argv[len(spec.Argv)-1])
	if err != nil {
		v, _ := adapter.Lookup(spec.Env, "BATCHFIT_BATCH_SIZE")
		size, err = strconv.Atoi(v)
	}
	if err != nil {
		return trial.Result{}, fmt.Errorf("fake executor: argv %q has no size", spec.Argv)
	}
	e.mu.Lock()
	e.sizes = append(e.sizes, size)
	e.envs = append(e.envs, spec.Env)
	e.mu.Unlock()
	t := e.trainer
	if t.block != nil && size == t.blockAt {
		close(t.block)
		<-ctx.Done()
		return trial.Result{ExitCode: -1, Canceled: true}, nil
	}
	report, _ := adapter.Lookup(spec.Env, adapter.ReportEnv)
	peak := t.fixed + uint64(size)*t.perSample
	if soak, _ := adapter.Lookup(spec.Env, adapter.SoakEnv); soak == "1" && t.fits(size) {
		return t.soak(size, peak, report, spec.Timeout), nil
	}
	switch {
	case t.hangFrom > 0 && size >= t.hangFrom:
		return trial.Result{ExitCode: -1, Signal: syscall.SIGKILL, TimedOut: true, Duration: spec.Timeout}, nil
	case t.crashAbove > 0 && size > t.crashAbove:
		return trial.Result{ExitCode: 1, StderrTail: []byte("Traceback (most recent call last):\nRuntimeError: mat1 and mat2 shapes cannot be multiplied\n")}, nil
	case !t.fits(size):
		adapter.Append(report, adapter.Event{Event: "exit", OOM: true, Exception: "torch.OutOfMemoryError", SizeRead: t.sizeRead})
		return trial.Result{ExitCode: 1, StderrTail: []byte("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")}, nil
	}
	if !t.noFigures {
		step := 0.1 + float64(size)*t.stepPerSample
		peaks := []uint64{peak - 1<<30, peak, peak}
		if t.rising {
			peaks = []uint64{peak - 2<<30, peak - 1<<30, peak}
		}
		ev := adapter.Event{Event: "exit", MaxAllocated: peak, MaxReserved: peak, Steps: 3, StepTimes: []float64{step, step},
			StepPeaks: peaks, Sources: statSources(t.sources), Opened: statSources(t.opened), SizeRead: t.sizeRead}
		if t.worstSteps > 0 {
			ev.Batches = &adapter.Batches{Source: "dataloader", Varied: true, WorstFirst: true, WorstSteps: t.worstSteps,
				Largest: adapter.BatchShape{"input_ids": {size, 2048}}}
		}
		if t.noMemory {
			ev.MaxAllocated, ev.MaxReserved, ev.StepPeaks = 0, 0, nil
		}
		adapter.Append(report, ev)
	} else if t.sizeRead {
		adapter.Append(report, adapter.Event{Event: "exit", SizeRead: true})
	}
	return trial.Result{ExitCode: 0, Duration: time.Second}, nil
}

// soak plays a soak at size: out of memory after soakSteps steps above
// soakFits, else running until batchfit stops it at its timeout, when the
// adapter reports what it saw (BATCHFIT_SOAK).
func (t fakeTrainer) soak(size int, peak uint64, report string, limit time.Duration) trial.Result {
	steps := 400
	if t.soakFits != 0 && size > t.soakFits {
		steps = t.soakSteps
	}
	peaks := make([]uint64, steps)
	for i := range peaks {
		peaks[i] = peak + uint64(i/100)<<20 // a cache that fills slowly
	}
	if steps != 400 {
		adapter.Append(report, adapter.Event{Event: "exit", OOM: true, Exception: "torch.OutOfMemoryError", Steps: steps, StepPeaks: peaks})
		return trial.Result{ExitCode: 1, Duration: limit / 2, StderrTail: []byte("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")}
	}
	ev := adapter.Event{Event: "exit", Stopped: true, MaxAllocated: peak, Steps: steps, StepPeaks: peaks}
	if t.worstSteps > 0 {
		ev.Batches = &adapter.Batches{Source: "dataloader", Varied: true, WorstFirst: true, WorstSteps: t.worstSteps}
	}
	adapter.Append(report, ev)
	return trial.Result{ExitCode: 0, Signal: syscall.SIGTERM, TimedOut: true, Duration: limit}
}

// statSources reports the files as the hook does: path, size and mtime.
func statSources(paths []string) []adapter.Source {
	var out []adapter.Source
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			out = append(out, adapter.Source{Path: p, Size: st.Size(), MTimeNS: st.ModTime().UnixNano()})
		}
	}
	return out
}

func (e *fakeExecutor) tried() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.sizes)
}

// fakeStore is the history in memory. Cached and Nearest answer what the
// test set, or else look up the runs finished so far as the store does
// (by fingerprint and command key).
type fakeStore struct {
	mu       sync.Mutex
	cached   *record.Run
	nearest  *record.Run
	runs     []*record.Run // finished, as stored
	beginErr error
	begun    []*record.Run
	trials   []record.Trial
	finished []record.Status
}

var _ Store = (*fakeStore)(nil)

func (s *fakeStore) BeginRun(_ context.Context, run *record.Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.beginErr != nil {
		return s.beginErr
	}
	run.ID = "run-1"
	s.begun = append(s.begun, run)
	return nil
}

func (s *fakeStore) AddTrial(_ context.Context, id string, t record.Trial) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != "run-1" {
		return fmt.Errorf("trial for unknown run %q", id)
	}
	s.trials = append(s.trials, t)
	return nil
}

func (s *fakeStore) FinishRun(_ context.Context, run *record.Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = append(s.finished, run.Status)
	run.Fingerprint = store.Fingerprint(run)
	// A copy, as the database keeps it: later edits of run do not reach it.
	b, err := json.Marshal(run)
	if err != nil {
		return err
	}
	var kept record.Run
	if err := json.Unmarshal(b, &kept); err != nil {
		return err
	}
	s.runs = append(s.runs, &kept)
	return nil
}

func (s *fakeStore) TrialStarted(context.Context, string, store.TrialProcess) (int64, error) {
	return 0, nil
}
func (s *fakeStore) ClearTrial(context.Context, int64) error { return nil }
func (s *fakeStore) JobSubmitting(context.Context, string, string) (int64, error) {
	return 0, nil
}
func (s *fakeStore) JobSubmitted(context.Context, int64, string) error { return nil }
func (s *fakeStore) ClearJob(context.Context, int64) error             { return nil }
func (s *fakeStore) Outside(context.Context, store.Machine) (uint64, error) {
	return 0, nil
}
func (s *fakeStore) NoteOutside(context.Context, store.Machine, uint64) error { return nil }

func (s *fakeStore) Cached(_ context.Context, fp string) (*record.Run, error) {
	if s.cached != nil {
		return s.cached, nil
	}
	return s.newest(func(r *record.Run) bool { return r.Fingerprint == fp }), nil
}

func (s *fakeStore) Nearest(_ context.Context, key string) (*record.Run, error) {
	if s.nearest != nil {
		return s.nearest, nil
	}
	return s.newest(func(r *record.Run) bool { return store.CommandKey(r) == key }), nil
}

func (s *fakeStore) newest(match func(*record.Run) bool) *record.Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.runs) - 1; i >= 0; i-- {
		if r := s.runs[i]; r.Status == record.Found && match(r) {
			c := *r
			return &c
		}
	}
	return nil
}

// fakeProgress records what the display was told.
type fakeProgress struct {
	mu      sync.Mutex
	info    ProgressInfo
	events  []search.Event
	started []int
	done    []record.Trial
	warns   []string
	closed  int
}

func (p *fakeProgress) Event(e search.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, e)
}

func (p *fakeProgress) TrialStarted(n, size int, gpus []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = append(p.started, size)
}

func (p *fakeProgress) TrialDone(t record.Trial) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = append(p.done, t)
}

func (p *fakeProgress) Warn(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.warns = append(p.warns, msg)
}

func (p *fakeProgress) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed++
}

// fakeClock advances a second each time it is read.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// fakeGPU is one card that counts the questions it was asked. procs are
// the processes it lists (none by default); with noProcs it lists none and
// answers used instead, as a driver without per-process figures.
type fakeGPU struct {
	device  gpu.Device
	mu      sync.Mutex
	queries int
	procs   map[int]uint64
	noProcs bool
	used    uint64
}

var _ gpu.Backend = (*fakeGPU)(nil)

func (g *fakeGPU) Devices() ([]gpu.Device, error) { return []gpu.Device{g.device}, nil }

func (g *fakeGPU) ProcessMemory(int) (map[int]uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queries++
	if g.noProcs {
		return nil, errors.New("per-process figures not available")
	}
	return maps.Clone(g.procs), nil
}

func (g *fakeGPU) UsedMemory(int) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queries++
	return g.used, nil
}

func (g *fakeGPU) Close() error { return nil }

// fixture is a run's config and fakes for every dependency.
type fixture struct {
	cfg      Config
	exec     *fakeExecutor
	store    *fakeStore
	progress *fakeProgress
	clock    *fakeClock
	gpu      *fakeGPU
	git      fakeGit
	claims   Claimer // nil claims nothing
	notices  []string
}

// fakeGit is a repository whose state the test sets; nil is none.
type fakeGit struct{ state *record.Git }

func (g fakeGit) State(context.Context, string) *record.Git { return g.state }

const gib = 1 << 30

func newFixture(t fakeTrainer) *fixture {
	f := &fixture{
		exec:     &fakeExecutor{trainer: t},
		store:    &fakeStore{},
		progress: &fakeProgress{},
		clock:    &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)},
		gpu:      &fakeGPU{device: gpu.Device{Index: 0, Name: "Fake GPU", Total: 80 * gib}},
	}
	f.cfg = Config{
		Command:   []string{"train", probe.Placeholder},
		Env:       []string{"PATH=" + os.Getenv("PATH")},
		Framework: adapter.Torch{},
		Search:    search.Config{Min: 1, Max: 4096, MultipleOf: 1, Strategy: search.Model},
		Steps:     3,
		Timeout:   time.Minute,
		Group:     gpugroup.Group{Name: "Fake GPU", Devices: []gpu.Device{f.gpu.device}},
		LogBase:   "",
		Version:   "test",

		CacheMaxAge: 30 * 24 * time.Hour,
	}
	return f
}

func (f *fixture) deps() Deps {
	return Deps{
		GPU:      f.gpu,
		Store:    f.store,
		Claims:   f.claims,
		Executor: func(gpugroup.Group) (probe.Executor, error) { return f.exec, nil },
		Progress: func(info ProgressInfo) Progress { f.progress.info = info; return f.progress },
		Notice:   func(msg string) { f.notices = append(f.notices, msg) },
		Now:      f.clock.Now,
		Git:      f.git,
	}
}

func (f *fixture) run(ctx context.Context) (*record.Run, error) {
	return Run(ctx, f.cfg, f.deps())
}
