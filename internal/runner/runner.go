// Package runner is the life of one search run: the answer from the history
// or a seed for the start, the trial log folder, the executor and prober,
// GPU sampling, progress, the search, proving the answer on a held card
// or settling a warm answer in fresh processes, recording, and clean-up.
// Every outside system comes in through Deps, so the whole life is
// testable with fakes.
package runner

import (
	"context"
	"os"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/claim"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/gpugroup"
	"github.com/batchfit/batchfit/internal/hold"
	"github.com/batchfit/batchfit/internal/inputs"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/store"
)

// Config is one search: what runs, on which GPUs, and how to search.
type Config struct {
	// Command is the argv of a trial, with probe.Placeholder where the
	// batch size goes. Shown, when set, is the command as recorded and
	// fingerprinted instead (the demo's child has temporary paths).
	Command, Shown []string
	Dir            string   // the trials' working directory; "" means batchfit's
	Env            []string // the trials' base environment; nil means os.Environ()
	Simulated      bool     // the GPU is the simulator's
	// Framework is the command's framework (adapter.Choose); nil means
	// adapter.None.
	Framework adapter.Framework
	// Search bounds and shapes the search. Run fills in its Capacity,
	// AllocatorCap, Parallel and OnEvent.
	Search  search.Config
	Steps   int           // training steps per trial (BATCHFIT_STEPS); 0: to the program's own end
	Timeout time.Duration // per trial
	// WorstCaseOff is --worst-case off: trials run their batches in the
	// program's order, not the loader's largest first
	// (probe.Config.WorstCaseOff).
	WorstCaseOff bool
	// Soak, when above 0, runs the answer once more in a fresh process for
	// this long (to the program's end, at most) once the search has found
	// it; an out-of-memory soak moves the answer down (see soak.go).
	Soak time.Duration
	// Throughput measures samples/s at the answer and a few sizes below it
	// in fresh trials once the search has found it, and recommends a
	// smaller size only when it is measurably faster (throughput.go).
	Throughput bool
	// MemoryLimit emulates a smaller card; the zero Limit is none.
	// MemoryLimitScope is what it holds: the whole process
	// (probe.Config.WholeProcess) unless limit.ScopeAllocator, which caps
	// only the framework's allocator.
	MemoryLimit      limit.Limit
	MemoryLimitScope limit.Scope
	// Group is the GPUs the search runs on and how trials share them.
	Group gpugroup.Group
	// Worker runs trials in a warm PyTorch worker; nil runs each in a
	// fresh process.
	Worker *WorkerOptions
	// Preload forks the trials of a Python command from a server that has
	// imported its third-party packages (internal/forkserver) instead of
	// starting each afresh; only where trials run here.
	Preload bool
	// Verbose shows details that change no answer: what the fork server
	// preloaded and left out.
	Verbose bool
	// Fresh searches even when the history has the answer.
	Fresh bool
	// AllowBusyGPU searches even when other processes hold memory on the
	// GPUs or another search uses them; they are recorded as warnings.
	AllowBusyGPU bool
	// CacheMaxAge is how old a cached answer may be; 0 never uses one.
	CacheMaxAge time.Duration
	// CacheEnv names environment variables that count as inputs beyond
	// the memory-relevant ones (inputs.MemoryEnv).
	CacheEnv []string
	// LogDir keeps every trial's output there. "" makes a temporary folder
	// under LogBase ("" means the system's), removed unless the run ended
	// unexpectedly.
	LogDir, LogBase string
	// Version is batchfit's, recorded with the run.
	Version string
}

// WorkerOptions shape a warm-worker search.
type WorkerOptions struct {
	// KeepAfterOOM keeps a worker after an out-of-memory trial when its
	// reset verified.
	KeepAfterOOM bool
}

// Deps are the outside systems a run uses; tests pass fakes.
type Deps struct {
	// GPU measures memory; gpu.Null{} where there is no driver.
	GPU gpu.Backend
	// Store is the history; store.Null{} for --no-db.
	Store Store
	// Claims gives a search the GPUs it runs on to itself, on this
	// machine, for as long as it runs (claim.Locks); nil means
	// claim.None{}, which claims nothing.
	Claims Claimer
	// Holder holds all but --memory-limit of a GPU for the trials that
	// prove the answer on a held card (hold.CUDA; the simulator's
	// Backend); nil holds nothing, and the proof runs capped.
	Holder hold.Holder
	// Executor returns what runs the trials of a group; a nil Executor
	// (or a nil result) runs them here as local process groups, watched
	// through GPU. A non-nil one runs them elsewhere (Slurm), where NVML
	// here cannot see them.
	Executor func(gpugroup.Group) (probe.Executor, error)
	// Progress starts the display of a search that runs trials; nil shows
	// nothing.
	Progress func(ProgressInfo) Progress
	// Notice tells the user one line outside the display (the start
	// point, where the logs are); nil says nothing.
	Notice func(msg string)
	// Alert tells the user a line that --quiet does not silence (that the
	// answer came from the history); nil means Notice.
	Alert func(msg string)
	// Git reads the repository state of the command's directory; nil
	// means inputs.ExecGit.
	Git inputs.Git
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Store is the history of runs; *store.Store and store.Null are two.
type Store interface {
	BeginRun(ctx context.Context, run *record.Run) error
	AddTrial(ctx context.Context, runID string, t record.Trial) error
	FinishRun(ctx context.Context, run *record.Run) error
	Cached(ctx context.Context, fingerprint string) (*record.Run, error)
	Nearest(ctx context.Context, commandKey string) (*record.Run, error)
	// TrialStarted records a trial's processes until ClearTrial, so that
	// a later batchfit can stop them if this one dies.
	TrialStarted(ctx context.Context, runID string, p store.TrialProcess) (int64, error)
	ClearTrial(ctx context.Context, id int64) error
	// JobSubmitting records a trial job's name before sbatch runs, and
	// JobSubmitted its id once known, until ClearJob, so that a later
	// batchfit can cancel the job if this one dies.
	JobSubmitting(ctx context.Context, runID, name string) (int64, error)
	JobSubmitted(ctx context.Context, id int64, jobID string) error
	ClearJob(ctx context.Context, id int64) error
	// Outside is what trials on a machine last held outside their
	// allocator, and NoteOutside records it: the first trial of a search
	// under a whole-process limit is capped by it.
	Outside(ctx context.Context, m store.Machine) (uint64, error)
	NoteOutside(ctx context.Context, m store.Machine, bytes uint64) error
}

// Claimer claims GPUs for a search: claim.Locks and claim.None are two.
type Claimer interface {
	// Take claims devices for h until the claim's Release, or returns a
	// *claim.HeldError naming the search that holds one of them.
	Take(devices []gpu.Device, h claim.Holder) (*claim.Claim, error)
}

var (
	_ Claimer = claim.Locks{}
	_ Claimer = claim.None{}
)

var (
	_ Store = (*store.Store)(nil)
	_ Store = store.Null{}
)

// withDefaults fills in the zero values of cfg and deps.
func withDefaults(cfg Config, deps Deps) (Config, Deps) {
	if cfg.Framework == nil {
		cfg.Framework = adapter.None{}
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.Dir == "" {
		cfg.Dir, _ = os.Getwd()
	}
	if deps.GPU == nil {
		deps.GPU = gpu.Null{}
	}
	if deps.Store == nil {
		deps.Store = store.Null{}
	}
	if deps.Claims == nil {
		deps.Claims = claim.None{}
	}
	if deps.Executor == nil {
		deps.Executor = func(gpugroup.Group) (probe.Executor, error) { return nil, nil }
	}
	if deps.Progress == nil {
		deps.Progress = func(ProgressInfo) Progress { return nopProgress{} }
	}
	if deps.Notice == nil {
		deps.Notice = func(string) {}
	}
	if deps.Alert == nil {
		deps.Alert = deps.Notice
	}
	if deps.Git == nil {
		deps.Git = inputs.ExecGit{}
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	return cfg, deps
}

// Run runs one search, or answers it from the history. The run it returns
// is complete whatever the error says; it is nil only when the search could
// not begin (a *hint.ConfigError, or the history could not be read or written).
func Run(ctx context.Context, cfg Config, deps Deps) (*record.Run, error) {
	cfg, deps = withDefaults(cfg, deps)
	s, cached, err := prepare(ctx, cfg, deps)
	if err != nil || cached != nil {
		return cached, err
	}
	defer s.cleanUp()
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	res, serr := s.runSearch(ctx)
	s.record(res)
	s.noteOutside(ctx)
	exit := s.finish(serr)
	s.keepOrDropLogs(exit)
	// The context may be canceled (Ctrl-C): the store still records the
	// run as interrupted.
	if err := deps.Store.FinishRun(ctx, s.run); err != nil {
		deps.Notice("warning: record the run: " + err.Error())
	}
	if s.keepLogs && exit != nil {
		deps.Notice("logs of every trial are in " + s.run.LogDir)
	}
	return s.run, exit
}
