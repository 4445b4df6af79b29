package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/caveat"
	"github.com/batchfit/batchfit/internal/claim"
	"github.com/batchfit/batchfit/internal/forkserver"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/inputs"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/logdir"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/store"
	"github.com/batchfit/batchfit/internal/trial"
)

// session is one search on its way: what Run has set up so far.
type session struct {
	cfg   Config
	deps  Deps
	scfg  search.Config
	limit uint64 // --memory-limit in bytes; 0 for none
	// held is what other processes held on each GPU before the search
	// (checkGPUs); nil when unknown.
	held  map[int]uint64
	total uint64 // the first GPU's memory; 0 when unknown
	run   *record.Run

	keepLogs bool
	mu       sync.Mutex // guards prog, which the fork server's start reads
	prog     Progress
	prober   trialProber
	fresh    *probe.Prober        // the fresh-process prober, whose trials report what the program loaded
	preload  *forkserver.Executor // with --preload, the fork server's executor; nil without
	claim    *claim.Claim         // the GPUs this run holds; the zero Claim holds none
	soaks    []record.Soak
	// throughput is what --throughput measured.
	throughput *record.Throughput
	// moved says why the soaks moved the answer, one line a move.
	moved []string
}

// prepare checks the config against the GPUs and starts the record; it
// returns the answer from the history instead when it has one.
func prepare(ctx context.Context, cfg Config, deps Deps) (s *session, cached *record.Run, err error) {
	if err := checkWorker(cfg); err != nil {
		return nil, nil, err
	}
	if err := logdir.Check(cfg.LogDir); err != nil {
		return nil, nil, err
	}
	s = &session{cfg: cfg, deps: deps, scfg: cfg.Search, claim: &claim.Claim{}}
	if s.limit, err = cfg.MemoryLimit.Resolve(cfg.Group.Devices); err != nil {
		return nil, nil, err
	}
	if len(cfg.Group.Devices) > 0 {
		s.total = cfg.Group.Devices[0].Total
	}
	s.run = s.newRun(ctx)
	if s.run.GPU != nil {
		s.scfg.Capacity = s.run.GPU.Capacity
		// Under a whole-process limit the allocator is capped at the limit
		// less what the process holds outside it: the context lies inside
		// Capacity, and comes off it (search.Config.AllocatorCap).
		s.scfg.AllocatorCap = s.limit > 0 && cfg.MemoryLimitScope == limit.ScopeAllocator
	}
	s.scfg.Parallel = max(1, len(cfg.Group.Slots))
	if err := validate(s.scfg); err != nil {
		return nil, nil, err
	}
	if cached, err = s.fromHistory(ctx); err != nil || cached != nil {
		return nil, cached, err
	}
	return s, nil, nil
}

// newRun starts the record of a run with everything known before a trial.
func (s *session) newRun(ctx context.Context) *record.Run {
	cfg := s.cfg
	sc := cfg.Search
	run := &record.Run{
		Status:    record.Running,
		Started:   s.deps.Now(),
		Command:   cfg.Command,
		Dir:       cfg.Dir,
		Simulated: cfg.Simulated,
		Version:   cfg.Version,
		Torch:     cfg.Framework.Version(ctx, cfg.Command),
		Settings: record.Settings{
			Min: sc.Min, Max: sc.Max, Start: sc.Start, MultipleOf: sc.MultipleOf, Steps: cfg.Steps,
			Strategy: string(sc.Strategy), Confirm: sc.Confirm, TimeoutSecs: cfg.Timeout.Seconds(),
			SoakSecs:    cfg.Soak.Seconds(),
			MemoryLimit: s.limit, Margin: sc.MarginPercent, Framework: cfg.Framework.Name(),
			Preload: cfg.Preload, Parallel: max(1, len(cfg.Group.Slots)), WorstCase: "on",
		},
	}
	if cfg.WorstCaseOff {
		run.Settings.WorstCase = "off"
	}
	if s.limit > 0 {
		run.Settings.MemoryLimitScope = string(limit.ScopeProcess)
		if cfg.MemoryLimitScope == limit.ScopeAllocator {
			run.Settings.MemoryLimitScope = string(limit.ScopeAllocator)
		}
		if c := cfg.MemoryLimit.Card; c != nil {
			run.Settings.MemoryLimitCard = c.Model
		}
	}
	if cfg.Shown != nil {
		run.Command = cfg.Shown
	}
	var program string
	if len(cfg.Command) > 0 {
		program = cfg.Command[0]
	}
	run.Inputs = inputs.Collect(ctx, inputs.Options{
		Command: run.Command, Program: program, Dir: cfg.Dir, Env: cfg.Env, CacheEnv: cfg.CacheEnv, Git: s.deps.Git,
	})
	if devices := cfg.Group.Devices; len(devices) > 0 {
		run.GPU = &record.GPUInfo{Devices: devices, Capacity: devices[0].Total}
		if s.limit > 0 {
			run.GPU.Capacity = s.limit
		}
	}
	return run
}

// begin makes the log folder, the prober and the display, and records the
// run's start.
func (s *session) begin(ctx context.Context) error {
	dir, keep, err := logdir.Open(s.cfg.LogDir, s.cfg.LogBase, s.run.Started)
	if err != nil {
		return err
	}
	s.run.LogDir, s.keepLogs = dir, keep
	pcfg, err := s.probeConfig(ctx)
	if err != nil {
		return err
	}
	// Trials that run here, watched through NVML: who else uses the GPU
	// is known before the first one, and checked during each.
	if pcfg.Sampler != nil {
		if err := s.checkGPUs(pcfg.Sampler); err != nil {
			return err
		}
		perGPU := s.placeSideBySide(&pcfg)
		pcfg.ForeignLimit = foreignLimit(s.cfg.Group.Devices, s.held, s.limit, perGPU)
	}
	if err := s.deps.Store.BeginRun(ctx, s.run); err != nil {
		return hint.With(fmt.Errorf("record the run: %w", err), "pass --no-db to search without the history")
	}
	if err := s.claim.Recorded(s.run.ID); err != nil {
		s.deps.Notice("warning: " + err.Error())
	}
	if s.cfg.Simulated {
		s.deps.Notice("the GPU is simulated: " + s.cfg.Group.Name)
	}
	placeholder := hasPlaceholder(s.cfg.Command)
	// From here until prog.Close nothing else writes to the terminal: the
	// live display owns it.
	prog := s.deps.Progress(s.progressInfo())
	s.mu.Lock()
	s.prog = prog
	s.mu.Unlock()
	pcfg.Warn = s.prog.Warn
	pcfg.OnStart = s.prog.TrialStarted
	pcfg.OnDone = func(t record.Trial) {
		s.prog.TrialDone(t)
		if err := s.deps.Store.AddTrial(ctx, s.run.ID, t); err != nil {
			s.prog.Warn(fmt.Sprintf("record trial %d: %v", t.N, err))
		}
	}
	pcfg.OnSpawn = s.recordSpawn(ctx)
	pcfg.OnSubmit = s.recordSubmit(ctx)
	check := &sizeCheck{trialProber: s.newProber(pcfg), capacity: s.capacity(), placeholder: placeholder, worker: s.cfg.Worker != nil}
	// The simulator's command has {}, and a warm worker gets its sizes
	// over its channel.
	if !placeholder && !s.cfg.Simulated && s.cfg.Worker == nil {
		check.warn = s.prog.Warn
	}
	s.prober = check
	s.chooseProof()
	return nil
}

// recordSpawn records each trial's processes in the history while it runs:
// should batchfit die, the next batchfit stops them (internal/trial.Stop).
func (s *session) recordSpawn(ctx context.Context) func(trial.Process) func() {
	return func(p trial.Process) func() {
		id, err := s.deps.Store.TrialStarted(ctx, s.run.ID, store.TrialProcess{
			PID: p.PID, PGID: p.PID, Start: p.Start, Cgroup: p.Cgroup, Cookie: p.Cookie,
		})
		if err != nil {
			s.prog.Warn(fmt.Sprintf("record the processes of a trial: %v", err))
			return nil
		}
		return func() {
			if err := s.deps.Store.ClearTrial(ctx, id); err != nil {
				s.prog.Warn(fmt.Sprintf("clear the record of a trial: %v", err))
			}
		}
	}
}

// recordSubmit records each trial job in the history while it may be
// queued: its name before sbatch runs, its id once sbatch returns it.
// Should batchfit die, the next batchfit cancels it.
func (s *session) recordSubmit(ctx context.Context) func(string) (func(string), func()) {
	return func(name string) (func(string), func()) {
		id, err := s.deps.Store.JobSubmitting(ctx, s.run.ID, name)
		if err != nil {
			s.prog.Warn(fmt.Sprintf("record a trial job: %v", err))
			return nil, nil
		}
		submitted := func(jobID string) {
			if err := s.deps.Store.JobSubmitted(ctx, id, jobID); err != nil {
				s.prog.Warn(fmt.Sprintf("record trial job %s: %v", jobID, err))
			}
		}
		done := func() {
			if err := s.deps.Store.ClearJob(ctx, id); err != nil {
				s.prog.Warn(fmt.Sprintf("clear the record of a trial job: %v", err))
			}
		}
		return submitted, done
	}
}

// probeConfig is how fresh trials run: the executor, the adapter, the
// memory limit, the sampler.
func (s *session) probeConfig(ctx context.Context) (probe.Config, error) {
	cfg := s.cfg
	executor, err := s.deps.Executor(cfg.Group)
	if err != nil {
		return probe.Config{}, err
	}
	pcfg := probe.Config{
		Command:          cfg.Command,
		Env:              cfg.Env,
		Dir:              cfg.Dir,
		Steps:            cfg.Steps,
		WorstCaseOff:     cfg.WorstCaseOff,
		Timeout:          cfg.Timeout,
		LogDir:           s.run.LogDir,
		Framework:        cfg.Framework,
		FrameworkVersion: s.run.Torch,
		MemoryLimit:      s.limit,
		WholeProcess:     s.limit > 0 && cfg.MemoryLimitScope != limit.ScopeAllocator,
		DeviceTotal:      s.total,
		Slots:            cfg.Group.Slots,
		Executor:         executor,
	}
	if executor == nil && pcfg.WholeProcess {
		pcfg.Holder, pcfg.Devices = s.deps.Holder, cfg.Group.Devices
	}
	if m, ok := s.machine(); ok && pcfg.WholeProcess {
		guess, err := s.deps.Store.Outside(ctx, m)
		if err != nil {
			s.deps.Notice("warning: " + err.Error())
		}
		pcfg.OutsideGuess = guess
	}
	if cfg.Framework.Hooked() {
		pp, err := adapter.Install(filepath.Join(s.run.LogDir, "adapter"))
		if err != nil {
			fix := "the adapter goes into the log folder: make room there, or give --log-dir elsewhere"
			if !s.keepLogs {
				fix = "the adapter goes into a temporary folder: make room in it, or give --log-dir elsewhere"
			}
			return probe.Config{}, hint.With(err, fix)
		}
		pcfg.PythonPath = pp
	}
	if executor == nil {
		// NVML sees this machine only; remote trials report their memory
		// through the adapter.
		pcfg.Sampler = gpu.NewSampler(s.deps.GPU, 0)
		if cfg.Preload && cfg.Framework.Hooked() {
			s.preload = forkserver.New(forkserver.Options{LogDir: s.run.LogDir, Notice: s.warn, Detail: s.preloadDetail})
			pcfg.Executor = s.preload
		}
	}
	return pcfg, nil
}

// preloadDetail shows what the fork server preloaded and left out only
// with Verbose: it changes no answer, and a large environment leaves out a
// dozen packages. A server that failed is a warning always (warn).
func (s *session) preloadDetail(msg string) {
	if s.cfg.Verbose {
		s.warn(msg)
	}
}

// warn shows msg as a warning of the display once there is one; it may be
// called from any goroutine (the fork server's start).
func (s *session) warn(msg string) {
	s.mu.Lock()
	prog := s.prog
	s.mu.Unlock()
	if prog != nil {
		prog.Warn(msg)
	} else {
		s.deps.Notice(msg)
	}
}

func (s *session) progressInfo() ProgressInfo {
	info := ProgressInfo{
		Limit: s.limit, AllocatorOnly: s.limit > 0 && s.cfg.MemoryLimitScope == limit.ScopeAllocator, Simulated: s.cfg.Simulated,
		MultipleOf: s.scfg.MultipleOf, Confirm: s.scfg.Confirm,
	}
	if devices := s.cfg.Group.Devices; len(devices) > 0 {
		info.GPU, info.Capacity = devices[0].Name, devices[0].Total
	}
	return info
}

// runSearch runs the search and, for a warm worker, settles its answer in
// fresh processes: a warm answer is reported only once fresh processes
// agree with it.
func (s *session) runSearch(ctx context.Context) (search.Result, error) {
	cfg := s.scfg
	cfg.OnEvent = func(ev search.Event) {
		switch ev.Kind {
		case search.EventPlan:
			s.prober.SetPhase(string(ev.Phase))
		case search.EventConflict, search.EventRisk:
			s.prog.Warn(caveat.Event(ev))
		}
		s.prog.Event(ev)
	}
	res, err := s.searchOnce(ctx, cfg)
	if err == nil && s.cfg.Soak > 0 {
		res, err = s.soakAnswer(ctx, cfg, res)
	}
	if err == nil && s.cfg.Throughput && res.Found {
		s.throughput, err = s.measureThroughput(ctx, res.Max)
	}
	s.prog.Close()
	return res, err
}

// searchOnce runs the search over cfg's range and, for a warm worker,
// settles its answer in fresh processes.
func (s *session) searchOnce(ctx context.Context, cfg search.Config) (search.Result, error) {
	res, err := search.Run(ctx, cfg, s.prober)
	if err == nil && s.run.Proof == record.ProofHeld {
		return s.proveHeld(ctx, cfg, res)
	}
	if err == nil && s.cfg.Worker != nil && !provenFresh(res) {
		var st search.Settled
		st, err = search.Settle(ctx, cfg, s.prober, res.Max, res.FirstFailure)
		res = settled(res, st)
	}
	return res, err
}

// settled is res with the answer that fresh trials settled. Where they
// disagreed, the answer is their safe side. The flaky sizes of both above
// it are kept, a size flaky in both with both counts; those at or below it
// are dropped, as warm trials do not speak for fresh ones.
func settled(res search.Result, st search.Settled) search.Result {
	if st.Max != res.Max {
		res.Risk = nil // the warm trials' figures placed another answer
	}
	res.Max, res.FirstFailure = st.Max, st.FirstFailure
	res.Rounds += st.Rounds
	res.ProofRounds += st.Rounds
	bySize := map[int]search.FlakySize{}
	for _, f := range slices.Concat(res.Flaky, st.Flaky) {
		if f.Size > st.Max {
			sum := bySize[f.Size]
			bySize[f.Size] = search.FlakySize{Size: f.Size, OK: sum.OK + f.OK, Failed: sum.Failed + f.Failed}
		}
	}
	res.Flaky = nil
	for _, size := range slices.Sorted(maps.Keys(bySize)) {
		res.Flaky = append(res.Flaky, bySize[size])
	}
	res.NonMonotonic = append(slices.Clip(res.NonMonotonic), st.NonMonotonic...)
	return res
}

// provenFresh reports whether fresh trials (the search's re-checks, which
// a warm worker runs in fresh processes) already saw the answer fit and its
// first failure fail: settling would only run them again.
func provenFresh(res search.Result) bool {
	seen := func(size int, fit bool) bool {
		return slices.ContainsFunc(res.Trials, func(o search.Observation) bool {
			return o.Retry && o.Size == size && o.Outcome.Fits() == fit && (fit || o.Outcome.TooLarge())
		})
	}
	return res.Found && seen(res.Max, true) && (res.FirstFailure == 0 || seen(res.FirstFailure, false))
}

// record puts what the search found into the run.
func (s *session) record(res search.Result) {
	run := s.run
	run.Finished = s.deps.Now()
	run.Seconds = run.Finished.Sub(run.Started).Seconds()
	run.Trials = s.prober.Trials()
	run.Rounds, run.ProofRounds = res.Rounds, res.ProofRounds
	run.Answer, run.FirstFailure, run.Margin = res.Max, res.FirstFailure, res.Margin
	if tp := s.throughput; tp != nil {
		run.Throughput, run.Recommended = tp, tp.Recommended
	}
	if s.fresh != nil && run.Inputs != nil {
		sources, truncated := s.fresh.Sources()
		h := inputs.NewHasher()
		run.Inputs.Loaded, run.Inputs.LoadedTruncated = inputs.Reported(sources, h), truncated
		run.Inputs.Opened = inputs.Reported(s.fresh.Opened(), h)
	}
	for _, c := range res.NonMonotonic {
		run.NonMonotonic = append(run.NonMonotonic, record.Pair{OK: c.Ok.Size, Fail: c.Fail.Size})
	}
	for _, f := range res.Flaky {
		run.Flaky = append(run.Flaky, record.FlakySize{Size: f.Size, OK: f.OK, Failed: f.Failed})
	}
	if r := res.Risk; r != nil {
		run.AtRisk = &record.Risk{Size: r.Size, From: r.From, ShortfallBytes: r.Shortfall, SlopeBytes: r.Slope}
	}
	if f := res.Model; f != nil {
		run.Model = &record.Model{Figure: string(res.Figure), Intercept: f.Intercept, Slope: f.Slope, Residual: f.Residual, Outside: res.Outside}
	}
	run.Pool = s.pool()
	if w := s.unusedSizeWarning(res); w != "" {
		run.Warnings = append(run.Warnings, w)
	}
	if w := caveat.Risk(res); w != "" {
		run.Warnings = append(run.Warnings, w)
	}
	if w := caveat.Fragmentation(run.Trials, res.FirstFailure, s.capacity()); w != "" {
		run.Warnings = append(run.Warnings, w)
	}
	run.InputShapes = record.InputShapesOf(run.Trials, run.Answer)
	if w := run.InputShapes.Warning(); w != "" {
		// Even with -q: the answer holds only for the shapes the trials met.
		run.Warnings = append(run.Warnings, w)
		s.deps.Alert("warning: " + w)
	}
	run.Soaks = s.soaks
	run.Warnings = append(run.Warnings, s.moved...)
	for _, w := range []string{s.risingWarning(), s.unsettledWarning()} {
		if w != "" {
			run.Warnings = append(run.Warnings, w)
			s.deps.Alert("warning: " + w)
		}
	}
}

// finish sets the run's status from the search's outcome and returns the
// error the caller reports.
func (s *session) finish(serr error) error {
	run := s.run
	var crash *search.CrashError
	var ignored *caveat.IgnoresBatchSizeError
	switch {
	case serr == nil:
		run.Status = record.Found
		return nil
	case errors.Is(serr, search.ErrNothingFits):
		run.Status = record.NothingFits
		nf := s.nothingFits(serr)
		run.Error = nf.Error()
		return nf
	case errors.As(serr, &crash):
		run.Status = record.Failed
		run.Error = serr.Error()
		return crashError(run, crash)
	case errors.As(serr, &ignored):
		run.Status = record.Failed
		run.Error = ignored.Error()
		return ignored
	case errors.Is(serr, context.Canceled):
		run.Status = record.Interrupted
		run.Error = "interrupted"
		if best := largestRan(run.Trials); best > 0 {
			return hint.With(ErrInterrupted, fmt.Sprintf("the largest size seen to run was %d; it is not proven the largest, as the search did not finish", best))
		}
		return ErrInterrupted
	default:
		run.Status = record.Failed
		run.Error = serr.Error()
		if fix := WorkerStartHint(serr, "full logs: "+filepath.Join(s.run.LogDir, "worker-*.err")); fix != "" {
			// A warm worker that did not start: show why, as doctor does.
			return hint.With(serr, fix)
		}
		return serr
	}
}

// nothingFits names the smallest size the search tried and how its trial
// ended, from the search's observation of it.
func (s *session) nothingFits(serr error) *NothingFitsError {
	nf := &NothingFitsError{
		Size: s.scfg.Min, Min: s.scfg.Min, MultipleOf: s.scfg.MultipleOf,
		Timeout: s.cfg.Timeout, LogDir: s.run.LogDir,
	}
	var snf *search.NothingFitsError
	if errors.As(serr, &snf) {
		nf.Size, nf.Outcome = snf.Observation.Size, snf.Observation.Outcome
		if t := s.run.LastFailure(nf.Size); t != nil {
			nf.Reason = t.Reason
		}
	}
	return nf
}

// keepOrDropLogs removes a temporary log folder unless the run ended
// unexpectedly, and with it the log paths in the record.
func (s *session) keepOrDropLogs(exit error) {
	if exit != nil && !s.keepLogs {
		s.keepLogs = !errors.Is(exit, ErrInterrupted)
	}
	if s.keepLogs {
		return
	}
	os.RemoveAll(s.run.LogDir)
	s.run.LogDir = ""
	for i := range s.run.Trials {
		s.run.Trials[i].Stdout, s.run.Trials[i].Stderr = "", ""
	}
}

// cleanUp stops what begin started, also when it failed half way.
func (s *session) cleanUp() {
	if s.prog != nil {
		s.prog.Close()
	}
	if s.prober != nil {
		s.prober.Close()
	}
	if s.preload != nil {
		s.preload.Close()
	}
	if !s.keepLogs && s.run.LogDir != "" {
		os.RemoveAll(s.run.LogDir)
	}
	// Last: the trials' processes, which hold GPU memory, are gone.
	s.claim.Release()
}

// largestRan returns the largest size a trial ran at, or 0.
func largestRan(trials []record.Trial) int {
	best := 0
	for _, t := range trials {
		if t.Outcome.Fits() && t.Size > best {
			best = t.Size
		}
	}
	return best
}
