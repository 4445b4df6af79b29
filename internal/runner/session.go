package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// session is one search on its way: what Run has set up so far.
type session struct {
	cfg   Config
	deps  Deps
	scfg  search.Config
	limit uint64 // --memory-limit in bytes; 0 for none
	total uint64 // the first GPU's memory; 0 when unknown
	run   *record.Run

	keepLogs bool
	prog     Progress
	prober   trialProber
}

// prepare checks the config against the GPUs, starts the record, and
// answers from the history when it can (run.Cached).
func prepare(ctx context.Context, cfg Config, deps Deps) (*session, error) {
	if err := checkWorker(cfg); err != nil {
		return &session{}, err
	}
	if err := checkLogDir(cfg.LogDir); err != nil {
		return &session{}, err
	}
	s := &session{cfg: cfg, deps: deps, scfg: cfg.Search}
	var err error
	if s.limit, err = cfg.MemoryLimit.Resolve(cfg.Group.Devices); err != nil {
		return &session{}, err
	}
	if len(cfg.Group.Devices) > 0 {
		s.total = cfg.Group.Devices[0].Total
	}
	s.run = s.newRun(ctx)
	if s.run.GPU != nil {
		s.scfg.Capacity = s.run.GPU.Capacity
		s.scfg.AllocatorCap = s.limit > 0
	}
	s.scfg.Parallel = max(1, len(cfg.Group.Slots))
	if err := validate(s.scfg); err != nil {
		return &session{}, err
	}
	cached, err := s.fromHistory(ctx)
	if err != nil {
		return &session{}, err
	}
	if cached != nil {
		return &session{run: cached}, nil
	}
	return s, nil
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
			MemoryLimit: s.limit, Margin: sc.MarginPercent, Framework: cfg.Framework.Name(),
		},
	}
	if cfg.Shown != nil {
		run.Command = cfg.Shown
	}
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
	dir, keep, err := openLogDir(s.cfg.LogDir, s.cfg.LogBase)
	if err != nil {
		return err
	}
	s.run.LogDir, s.keepLogs = dir, keep
	pcfg, err := s.probeConfig()
	if err != nil {
		return err
	}
	if err := s.deps.Store.BeginRun(ctx, s.run); err != nil {
		return withHint(fmt.Errorf("record the run: %w", err), "pass --no-db to search without the history")
	}
	if s.cfg.Simulated {
		s.deps.Notice("the GPU is simulated: " + s.cfg.Group.Name)
	}
	// The simulator's command has {}, and a warm worker gets its sizes
	// over its channel.
	placeholder := hasPlaceholder(s.cfg.Command)
	if !placeholder && !s.cfg.Simulated && s.cfg.Worker == nil {
		s.deps.Notice("warning: the command has no {}; only BATCHFIT_BATCH_SIZE carries the batch size")
	}
	// From here until prog.Close nothing else writes to the terminal: the
	// live display owns it.
	s.prog = s.deps.Progress(s.progressInfo())
	pcfg.Warn = s.prog.Warn
	pcfg.OnStart = s.prog.TrialStarted
	pcfg.OnDone = func(t record.Trial) {
		s.prog.TrialDone(t)
		if err := s.deps.Store.AddTrial(ctx, s.run.ID, t); err != nil {
			s.prog.Warn(fmt.Sprintf("record trial %d: %v", t.N, err))
		}
	}
	s.prober = &sizeCheck{trialProber: s.newProber(pcfg), capacity: s.capacity(), placeholder: placeholder, worker: s.cfg.Worker != nil}
	return nil
}

// probeConfig is how fresh trials run: the executor, the adapter, the
// memory limit, the sampler.
func (s *session) probeConfig() (probe.Config, error) {
	cfg := s.cfg
	executor, err := s.deps.Executor(cfg.Group)
	if err != nil {
		return probe.Config{}, err
	}
	pcfg := probe.Config{
		Command:     cfg.Command,
		Env:         cfg.Env,
		Dir:         cfg.Dir,
		Steps:       cfg.Steps,
		Timeout:     cfg.Timeout,
		LogDir:      s.run.LogDir,
		Framework:   cfg.Framework,
		MemoryLimit: s.limit,
		DeviceTotal: s.total,
		Slots:       cfg.Group.Slots,
		Executor:    executor,
	}
	if cfg.Framework.Hooked() {
		pp, err := adapter.Install(filepath.Join(s.run.LogDir, "adapter"))
		if err != nil {
			return probe.Config{}, fmt.Errorf("install the Python adapter: %w", err)
		}
		pcfg.PythonPath = pp
	}
	if executor == nil {
		// NVML sees this machine only; remote trials report their memory
		// through the adapter.
		pcfg.Sampler = gpu.NewSampler(s.deps.GPU, 0)
	}
	return pcfg, nil
}

func (s *session) progressInfo() ProgressInfo {
	info := ProgressInfo{
		Limit: s.limit, Simulated: s.cfg.Simulated,
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
		if ev.Kind == search.EventPlan {
			s.prober.SetPhase(string(ev.Phase))
		}
		s.prog.Event(ev)
	}
	res, err := search.Run(ctx, cfg, s.prober)
	if err == nil && s.cfg.Worker != nil {
		var st search.Settled
		st, err = search.Settle(ctx, cfg, s.prober, res.Max, res.FirstFailure)
		res.Max, res.FirstFailure = st.Max, st.FirstFailure
	}
	s.prog.Close()
	return res, err
}

// record puts what the search found into the run.
func (s *session) record(res search.Result) {
	run := s.run
	run.Finished = s.deps.Now()
	run.Seconds = run.Finished.Sub(run.Started).Seconds()
	run.Trials = s.prober.Trials()
	run.Rounds = res.Rounds
	run.Answer, run.FirstFailure, run.Margin = res.Max, res.FirstFailure, res.Margin
	run.Recommended = record.Recommend(run.Trials)
	for _, c := range res.NonMonotonic {
		run.NonMonotonic = append(run.NonMonotonic, record.Pair{OK: c.Ok.Size, Fail: c.Fail.Size})
	}
	if f := res.Model; f != nil {
		run.Model = &record.Model{Figure: string(res.Figure), Intercept: f.Intercept, Slope: f.Slope, Residual: f.Residual}
	}
	if w := s.unusedSizeWarning(res); w != "" {
		run.Warnings = append(run.Warnings, w)
	}
}

// finish sets the run's status from the search's outcome and returns the
// error the caller reports.
func (s *session) finish(serr error) error {
	run := s.run
	var crash *search.CrashError
	var ignored *IgnoresBatchSizeError
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
		return ErrInterrupted
	default:
		run.Status = record.Failed
		run.Error = serr.Error()
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
	if !s.keepLogs && s.run.LogDir != "" {
		os.RemoveAll(s.run.LogDir)
	}
}
