package main

import (
	"context"
	"errors"
	"fmt"
	goio "io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/report"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/store"
	"github.com/batchfit/batchfit/internal/worker"
)

// searchOptions are the flags shared by search and demo.
type searchOptions struct {
	min, max, start, multipleOf int
	steps                       int
	timeout                     time.Duration
	confirm                     int
	strategy                    string
	memoryLimit                 string
	margin                      float64
	json, quiet                 bool
	logDir                      string
	torch                       bool
	fresh                       bool
	gpus                        string
	worker, keepAfterOOM        bool
	gpusPerTrial                int
	perGPUModel                 bool
	db                          dbOptions
	out                         outputOptions
	exec                        executorOptions
}

func (o *searchOptions) register(fs *pflag.FlagSet) {
	fs.IntVar(&o.min, "min", 1, "smallest batch size to consider")
	fs.IntVar(&o.max, "max", 65536, "largest batch size to consider")
	fs.IntVar(&o.start, "start", 0, "first batch size to try (default: chosen by the strategy)")
	fs.IntVar(&o.multipleOf, "multiple-of", 1, "only consider batch sizes that are multiples of this")
	fs.IntVar(&o.steps, "steps", 3, "training steps per trial, passed as BATCHFIT_STEPS")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "time limit per trial; a trial past it is killed and counts as not fitting")
	fs.IntVar(&o.confirm, "confirm", 0, "re-run the answer this many more times in fresh processes")
	fs.StringVar(&o.strategy, "strategy", "model", "search strategy: model (memory-model guided) or bisect")
	fs.StringVar(&o.memoryLimit, "memory-limit", "", "emulate a smaller card: a size (24GiB, 40GB) or a share of the GPU (80%)")
	fs.Float64Var(&o.margin, "margin", 0, "also report the largest size that leaves this percentage of memory free (0-90)")
	fs.BoolVar(&o.json, "json", false, "print the whole record as JSON")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print only the answer")
	fs.BoolVar(&o.fresh, "fresh", false, "search again even when the history has the answer")
	o.db.register(fs, true)
	o.out.register(fs)
	o.exec.register(fs)
	fs.BoolVar(&o.worker, "worker", false, "run trials in a warm PyTorch worker (python -m batchfit.worker module:Trial) whose reset is verified; the answer is confirmed in fresh processes")
	fs.BoolVar(&o.keepAfterOOM, "keep-after-oom", false, "with --worker, keep a worker after an out-of-memory trial when its reset verified")
	fs.StringVar(&o.gpus, "gpus", "", "run trials in parallel, each pinned to its own GPU(s): a list such as 0,1,2,3, or all")
	fs.IntVar(&o.gpusPerTrial, "gpus-per-trial", 1, "GPUs one trial spans (torchrun --nproc_per_node=N); the batch size is per GPU")
	fs.BoolVar(&o.perGPUModel, "per-gpu-model", false, "with several GPU models in --gpus, run one search per model and report a table")
	fs.StringVar(&o.logDir, "log-dir", "", "keep every trial's stdout and stderr here (default: a temporary folder, kept only when something failed unexpectedly)")
}

func newSearchCommand(io *streams) *cobra.Command {
	var o searchOptions
	cmd := &cobra.Command{
		Use:   "search [flags] -- COMMAND [ARGS...]",
		Short: "Find the largest batch size COMMAND runs at",
		Long: `Run COMMAND at different batch sizes, each trial in a fresh process, and report
the largest size that runs. "{}" in ARGS is replaced by the batch size (no
shell is involved); every trial also gets BATCHFIT_BATCH_SIZE, BATCHFIT_STEPS
and BATCHFIT_TRIAL in its environment.

The answer is exact: it was seen to run, and the next size up was seen to fail.

` + exitCodesHelp,
		Example: `  batchfit search -- python train.py --batch-size {} --max-steps 3
  batchfit search --memory-limit 24GiB -- python train.py --batch-size {}
  batchfit search -q --multiple-of 8 -- ./train.sh
  batchfit search --worker -- python -m batchfit.worker mymodule:Trial
  batchfit search --gpus 0,1 --gpus-per-trial 2 -- torchrun --nproc_per_node=2 train.py --batch-size {}
  batchfit search --executor slurm --jobs 4 --partition gpu -- python train.py --batch-size {}`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || cmd.ArgsLenAtDash() != 0 {
				return usageError("put the training command after --: batchfit search -- python train.py --batch-size {}", "no command to search")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := commandTarget(args, o.torch)
			if err != nil {
				return err
			}
			return o.execute(cmd.Context(), io, t)
		},
	}
	o.register(cmd.Flags())
	cmd.Flags().BoolVar(&o.torch, "torch", false, "load the PyTorch adapter into the trial (automatic when COMMAND is a Python interpreter)")
	return cmd
}

// target is what a search runs: a real command on real GPUs, or the
// simulator.
type target struct {
	command []string
	// shown is the command as recorded and fingerprinted, when it differs
	// from the argv that runs (the demo's child has temporary paths).
	shown     []string
	backend   gpu.Backend // nil: no GPU figures
	gpuHint   string      // why there are no GPU figures
	simulated bool
	torch     bool
}

// commandTarget checks the user's command and finds the GPUs.
func commandTarget(argv []string, torchFlag bool) (*target, error) {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, usageError("check the command's spelling, that it is installed, and that it is executable", "cannot run %q: %v", argv[0], unwrapExec(err))
	}
	isPython := adapter.IsPython(argv)
	if torchFlag && !isPython {
		return nil, usageError("--torch needs a Python command (python, torchrun, accelerate ...); leave it out for other programs", "--torch: %q is not a Python interpreter", argv[0])
	}
	t := &target{command: argv, torch: torchFlag || isPython}
	b, err := gpu.Detect()
	if err != nil {
		t.gpuHint = err.Error()
	} else {
		t.backend = b
	}
	return t, nil
}

func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// execute runs the search, one per GPU model with --per-gpu-model, and
// prints the result.
func (o *searchOptions) execute(ctx context.Context, io *streams, t *target) error {
	if t.backend != nil {
		defer t.backend.Close()
	}
	cfg, err := o.searchConfig()
	if err != nil {
		return err
	}
	if err := o.out.check(); err != nil {
		return err
	}
	if err := o.exec.check(o); err != nil {
		return err
	}
	var devices []gpu.Device
	if t.backend != nil {
		devices, err = t.backend.Devices()
		if err != nil {
			return failure(exitError, "", fmt.Errorf("list GPUs: %w", err))
		}
	}
	groups, err := o.gpuGroups(devices)
	if o.exec.slurm() {
		groups, err = o.slurmGroups()
	}
	if err != nil {
		return err
	}
	if o.worker {
		switch {
		case t.simulated:
			return usageError("the demo runs fresh processes; try --worker with a PyTorch Trial module", "--worker is not available in the demo")
		case !t.torch:
			return usageError("run a Trial module: batchfit search --worker -- python -m batchfit.worker mymodule:Trial", "--worker needs a Python command")
		case len(groups[0].slots) > 1:
			return usageError("leave out --worker to run trials on several GPUs at once", "--worker runs one trial at a time; it cannot be combined with parallel --gpus")
		}
	}
	db, err := o.db.open(ctx)
	if err != nil {
		return err
	}
	if db != nil {
		defer db.Close()
	}
	if t.gpuHint != "" && !o.quiet {
		fmt.Fprintf(io.stderr, "batchfit: hint: %s\n", t.gpuHint)
	}
	var runs []*record.Run
	var exit error
	for _, g := range groups {
		if len(groups) > 1 && !o.quiet {
			fmt.Fprintf(io.stderr, "batchfit: searching on %s (GPUs %s)\n", g.name, joinInts(g.indexes()))
		}
		run, err := o.searchOne(ctx, io, t, g, db, cfg)
		if run != nil {
			runs = append(runs, run)
			if werr := o.out.write(run, len(groups) > 1); werr != nil && exit == nil {
				exit = werr
			}
		}
		if err != nil {
			exit = err
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				break
			}
		}
	}
	if err := o.printRuns(io, runs); err != nil {
		return failure(exitError, "", err)
	}
	return exit
}

// searchOne runs one search on one group of GPUs, or answers it from the
// history. The run it returns is complete whatever the error says.
func (o *searchOptions) searchOne(ctx context.Context, io *streams, t *target, g gpuGroup, db runStore, cfg search.Config) (*record.Run, error) {
	limit, fraction, err := o.limit(g.devices)
	if err != nil {
		return nil, err
	}
	run := o.newRun(ctx, t, g.devices, limit)
	if run.GPU != nil {
		cfg.Capacity = run.GPU.Capacity
		cfg.AllocatorCap = limit > 0
	}
	cfg.Parallel = max(1, len(g.slots))
	if err := validate(cfg); err != nil {
		return nil, err
	}
	if db != nil {
		cached, err := o.fromHistory(ctx, io, db, run, &cfg)
		if cached != nil || err != nil {
			return cached, err
		}
	}
	logDir, keepLogs, err := o.openLogDir()
	if err != nil {
		return nil, err
	}
	run.LogDir = logDir
	var executor probe.Executor
	if o.exec.slurm() {
		if executor, err = o.exec.executor(g.constraint, o.gpusPerTrial); err != nil {
			return nil, err
		}
	}

	pcfg := probe.Config{
		Command:        t.command,
		Env:            os.Environ(),
		Dir:            run.Dir,
		Steps:          o.steps,
		Timeout:        o.timeout,
		LogDir:         logDir,
		MemoryLimit:    limit,
		MemoryFraction: fraction,
		Slots:          g.slots,
		Executor:       executor,
	}
	if t.torch {
		pp, err := adapter.Install(filepath.Join(logDir, "adapter"))
		if err != nil {
			return nil, failure(exitError, "", fmt.Errorf("install the PyTorch adapter: %w", err))
		}
		pcfg.PythonPath = pp
	}
	if t.backend != nil && executor == nil {
		// NVML sees this machine only; Slurm trials report their memory
		// through the adapter.
		pcfg.Sampler = gpu.NewSampler(t.backend, 0)
	}
	if db != nil {
		if err := db.BeginRun(ctx, run); err != nil {
			return nil, failure(exitError, "pass --no-db to search without the history", fmt.Errorf("record the run: %w", err))
		}
	}
	if t.simulated && !o.quiet {
		fmt.Fprintf(io.stderr, "batchfit: the GPU is simulated: %s\n", g.name)
	}
	// Between here and prog.Close nothing else writes to stderr: the live
	// display owns it.
	prog := o.progress(io, t, g, limit)
	defer prog.Close()
	pcfg.Warn = prog.Warn
	pcfg.OnStart = prog.TrialStarted
	pcfg.OnDone = func(tr record.Trial) {
		prog.TrialDone(tr)
		if db != nil {
			if err := db.AddTrial(ctx, run.ID, tr); err != nil {
				prog.Warn(fmt.Sprintf("record trial %d: %v", tr.N, err))
			}
		}
	}
	prober := o.newProber(t, g, pcfg, limit, fraction, prog)
	defer prober.Close()
	cfg.OnEvent = func(ev search.Event) {
		if ev.Kind == search.EventPlan {
			prober.SetPhase(string(ev.Phase))
		}
		prog.Event(ev)
	}

	res, serr := search.Run(ctx, cfg, prober)
	if _, ok := prober.(*worker.Prober); ok && serr == nil {
		// A warm worker's answer is reported only once fresh processes
		// agree with it.
		st, err := search.Settle(ctx, cfg, prober, res.Max, res.FirstFailure)
		res.Max, res.FirstFailure, serr = st.Max, st.FirstFailure, err
	}
	prog.Close()
	run.Finished = time.Now()
	run.Seconds = run.Finished.Sub(run.Started).Seconds()
	run.Trials = prober.Trials()
	run.Rounds = res.Rounds
	run.Answer, run.FirstFailure, run.Margin = res.Max, res.FirstFailure, res.Margin
	run.Recommended = record.Recommend(run.Trials)
	for _, c := range res.NonMonotonic {
		run.NonMonotonic = append(run.NonMonotonic, record.Pair{OK: c.Ok.Size, Fail: c.Fail.Size})
	}
	if f := res.Model; f != nil {
		run.Model = &record.Model{Figure: string(res.Figure), Intercept: f.Intercept, Slope: f.Slope, Residual: f.Residual}
	}
	exit := o.finish(run, serr)
	if exit != nil && !keepLogs {
		keepLogs = unexpected(exit)
	}
	if !keepLogs {
		os.RemoveAll(logDir)
		run.LogDir = ""
		for i := range run.Trials {
			run.Trials[i].Stdout, run.Trials[i].Stderr = "", ""
		}
	}
	if db != nil {
		// The context may be canceled (Ctrl-C): the store still records the
		// run as interrupted.
		if err := db.FinishRun(ctx, run); err != nil {
			fmt.Fprintf(io.stderr, "batchfit: warning: record the run: %v\n", err)
		}
	}
	if keepLogs && exit != nil && !o.quiet {
		fmt.Fprintf(io.stderr, "batchfit: logs of every trial are in %s\n", logDir)
	}
	return run, exit
}

// newRun starts the record of a run with everything known before a trial.
func (o *searchOptions) newRun(ctx context.Context, t *target, devices []gpu.Device, limit uint64) *record.Run {
	run := &record.Run{
		Status:    record.Running,
		Started:   time.Now(),
		Command:   t.command,
		Simulated: t.simulated,
		Version:   version,
		Settings: record.Settings{
			Min: o.min, Max: o.max, Start: o.start, MultipleOf: o.multipleOf, Steps: o.steps,
			Strategy: o.strategy, Confirm: o.confirm, TimeoutSecs: o.timeout.Seconds(),
			MemoryLimit: limit, Margin: o.margin, Torch: t.torch,
		},
	}
	if t.shown != nil {
		run.Command = t.shown
	}
	run.Dir, _ = os.Getwd()
	if t.torch {
		run.Torch = adapter.TorchVersion(ctx, t.command)
	}
	if len(devices) > 0 {
		run.GPU = &record.GPUInfo{Devices: devices, Capacity: devices[0].Total}
		if limit > 0 {
			run.GPU.Capacity = limit
		}
	}
	return run
}

// fromHistory returns the answer from the history when the same search was
// done before, or seeds the start from a close one.
func (o *searchOptions) fromHistory(ctx context.Context, io *streams, db runStore, run *record.Run, cfg *search.Config) (*record.Run, error) {
	if !o.fresh {
		cached, err := db.Cached(ctx, store.Fingerprint(run))
		if err != nil {
			return nil, failure(exitError, "pass --no-db to search without the history", fmt.Errorf("read the history: %w", err))
		}
		if cached != nil {
			cached.Cached = true
			if !o.quiet {
				fmt.Fprintf(io.stderr, "batchfit: answered from the history (run %s); --fresh searches again\n", cached.ID)
			}
			return cached, nil
		}
	}
	if o.start != 0 {
		return nil, nil
	}
	near, err := db.Nearest(ctx, store.CommandKey(run))
	if err != nil || near == nil {
		return nil, nil
	}
	if seed := seedStart(near, run, *cfg); seed > 0 {
		cfg.Start = seed
		run.Settings.Start = seed
		if !o.quiet {
			fmt.Fprintf(io.stderr, "batchfit: starting at %d, from run %s (answer %d on other settings)\n", seed, near.ID, near.Answer)
		}
	}
	return nil, nil
}

// seedStart scales a close run's answer to this run's capacity, a little
// below, so that the first trial most likely fits and lands near the
// boundary.
func seedStart(near, run *record.Run, cfg search.Config) int {
	seed := float64(near.Answer) * 0.9
	if near.GPU != nil && run.GPU != nil && near.GPU.Capacity > 0 {
		seed *= float64(run.GPU.Capacity) / float64(near.GPU.Capacity)
	}
	s := int(seed) / cfg.MultipleOf * cfg.MultipleOf
	if s < cfg.Min || s > cfg.Max {
		return 0
	}
	return s
}

// finish sets the run's status from the search's outcome and returns the
// error that decides the exit code.
func (o *searchOptions) finish(run *record.Run, serr error) error {
	var crash *search.CrashError
	switch {
	case serr == nil:
		run.Status = record.Found
		return nil
	case errors.Is(serr, search.ErrNothingFits):
		run.Status = record.NothingFits
		return failure(exitNothingFits, fmt.Sprintf("lower --min, or check that the command fits on this GPU at all (see the trial logs in %s)", run.LogDir), fmt.Errorf("nothing fits: batch size %d does not run", o.min))
	case errors.As(serr, &crash):
		run.Status = record.Failed
		run.Error = serr.Error()
		t := run.LastFailure(crash.Observation.Size)
		hint := "the command failed for a reason other than memory; fix it, then search again"
		if t != nil {
			hint = fmt.Sprintf("the command failed for a reason other than memory at batch size %d; its stderr ends with:\n%s\nfull log: %s", t.Size, indentTail(t.Tail, 15), t.Stderr)
		}
		return failure(exitError, hint, fmt.Errorf("trial crashed: %s", crash.Observation.Outcome))
	case errors.Is(serr, context.Canceled):
		run.Status = record.Interrupted
		run.Error = "interrupted"
		return failure(exitInterrupted, "", errors.New("interrupted; every trial process was stopped"))
	default:
		run.Status = record.Failed
		run.Error = serr.Error()
		return failure(exitError, "", serr)
	}
}

func (o *searchOptions) printRuns(io *streams, runs []*record.Run) error {
	if len(runs) == 1 {
		return o.print(io, runs[0])
	}
	if o.json {
		return report.WriteJSONValue(io.stdout, runs)
	}
	if o.quiet {
		for _, r := range runs {
			answer := "-"
			if r.Status == record.Found {
				answer = strconv.Itoa(r.Answer)
			}
			fmt.Fprintf(io.stdout, "%s\t%s\n", r.GPU.Devices[0].Name, answer)
		}
		return nil
	}
	return report.WriteModelTable(io.stdout, runs)
}

func (o *searchOptions) print(io *streams, run *record.Run) error {
	switch {
	case o.json:
		return report.WriteJSON(io.stdout, run)
	case o.quiet:
		if run.Status == record.Found {
			_, err := fmt.Fprintln(io.stdout, run.Answer)
			return err
		}
		return nil
	default:
		return report.WriteSummary(io.stdout, run)
	}
}

// searchConfig validates the flags that shape the search.
func (o *searchOptions) searchConfig() (search.Config, error) {
	cfg := search.Config{
		Min: o.min, Max: o.max, Start: o.start, MultipleOf: o.multipleOf,
		Confirm: o.confirm, Strategy: search.Strategy(o.strategy), Parallel: 1,
	}
	if o.margin > 0 && o.margin <= 90 {
		cfg.MarginPercent = o.margin
	}
	if o.strategy != "model" && o.strategy != "bisect" {
		return cfg, usageError("use --strategy model or --strategy bisect", "unknown strategy %q", o.strategy)
	}
	if o.multipleOf < 1 {
		return cfg, usageError("--multiple-of 8 keeps every size a multiple of 8; 1 allows any size", "--multiple-of must be at least 1, got %d", o.multipleOf)
	}
	if o.min < 1 || o.max < 1 || o.start < 0 {
		return cfg, usageError("batch sizes are positive: check --min, --max and --start", "--min, --max and --start must be positive")
	}
	if o.steps < 1 {
		return cfg, usageError("give --steps a positive number of training steps", "--steps must be at least 1, got %d", o.steps)
	}
	if o.timeout <= 0 {
		return cfg, usageError("give --timeout a positive duration such as 10m", "--timeout must be positive, got %s", o.timeout)
	}
	if o.confirm < 0 {
		return cfg, usageError("--confirm counts extra runs of the answer: 0 or more", "--confirm must not be negative, got %d", o.confirm)
	}
	if o.margin != 0 && (o.margin < 0 || o.margin > 90) {
		return cfg, usageError("--margin is a percentage of memory to leave free, from 0 to 90", "--margin %g is outside 0-90", o.margin)
	}
	bounds := cfg
	bounds.MarginPercent = 0 // checked once the capacity is known
	return cfg, validate(bounds)
}

// validate checks the search's bounds; it runs again once the GPU's
// capacity is known, which --margin needs.
func validate(cfg search.Config) error {
	if err := cfg.Validate(); err != nil {
		hint := "check --min, --max, --start and --multiple-of"
		if cfg.MarginPercent > 0 && cfg.Capacity == 0 {
			hint = "--margin needs GPU memory figures: run where the NVIDIA driver is, or leave --margin out"
		}
		return usageError(hint, "%s", err)
	}
	return nil
}

// openLogDir returns the folder for trial logs and whether to keep it.
func (o *searchOptions) openLogDir() (string, bool, error) {
	if o.logDir == "" && o.exec.slurm() {
		dir, err := slurmLogDir()
		if err != nil {
			return "", false, failure(exitError, "pass --log-dir on a folder the compute nodes can see", fmt.Errorf("create a folder for trial logs: %w", err))
		}
		return dir, false, nil
	}
	if o.logDir == "" {
		dir, err := os.MkdirTemp("", "batchfit-")
		if err != nil {
			return "", false, failure(exitError, "set TMPDIR to a writable folder, or pass --log-dir", fmt.Errorf("create a folder for trial logs: %w", err))
		}
		return dir, false, nil
	}
	if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		return "", false, usageError("pass a --log-dir you can write to", "--log-dir: %v", err)
	}
	f, err := os.CreateTemp(o.logDir, ".batchfit-check-")
	if err != nil {
		return "", false, usageError("pass a --log-dir you can write to", "--log-dir %s is not writable: %v", o.logDir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	abs, _ := filepath.Abs(o.logDir)
	return abs, true, nil
}

// unexpected reports whether an exit deserves the trial logs kept.
func unexpected(err error) bool {
	var ee *exitErr
	return !errors.As(err, &ee) || (ee.code != exitFound && ee.code != exitInterrupted)
}

func indentTail(s string, lines int) string {
	out := lastLines(s, lines)
	if out == "" {
		return "  (no output)"
	}
	return out
}

// progress returns the live display on a terminal, plain lines otherwise,
// and nothing with --quiet.
func (o *searchOptions) progress(io *streams, t *target, g gpuGroup, limit uint64) report.Progress {
	if o.quiet {
		return report.NewProgress(goio.Discard, report.ProgressOptions{})
	}
	f, ok := io.stderr.(*os.File)
	tty := ok && isatty.IsTerminal(f.Fd()) && os.Getenv("TERM") != "dumb"
	opts := report.ProgressOptions{
		TTY: tty, Color: tty && os.Getenv("NO_COLOR") == "",
		Limit: limit, Simulated: t.simulated, Title: "batchfit search",
		MultipleOf: o.multipleOf, Confirm: o.confirm,
	}
	if t.simulated {
		opts.Title = "batchfit demo"
	}
	if len(g.devices) > 0 {
		opts.GPU, opts.Capacity = g.devices[0].Name, g.devices[0].Total
	}
	return report.NewProgress(io.stderr, opts)
}

// trialProber is what a search runs its trials through: fresh processes
// (probe.Prober) or a warm worker (worker.Prober).
type trialProber interface {
	search.Prober
	SetPhase(phase string)
	Trials() []record.Trial
	TorchVersion() string
	Close() error
}

// newProber returns the fresh-process prober, or with --worker a warm
// worker that falls back to fresh processes for re-checks, confirmations
// and the final answer.
func (o *searchOptions) newProber(t *target, g gpuGroup, pcfg probe.Config, limit uint64, fraction float64, prog report.Progress) trialProber {
	if !o.worker {
		return probe.New(pcfg)
	}
	// Under a --memory-limit that leaves the card room for three capped
	// processes, the next worker starts while the current one runs, and the
	// fresh confirmations run side by side: each process is held to the
	// limit by its own allocator cap, so none changes another's answer.
	roomy := limit > 0 && len(g.devices) > 0 && g.devices[0].Total >= 3*(limit+1<<30)
	if roomy {
		pcfg.Slots = [][]int{nil, nil}
	}
	// The worker's records number fresh trials among the warm ones; those
	// reach the history with the finished run, not under the fresh
	// prober's own numbers.
	onDone := pcfg.OnDone
	pcfg.OnDone = prog.TrialDone
	fresh := probe.New(pcfg)
	return worker.NewProber(worker.ProberConfig{
		Standby:      roomy,
		Command:      t.command,
		Env:          worker.Environ(os.Environ(), pcfg.PythonPath, fraction),
		Dir:          pcfg.Dir,
		Steps:        pcfg.Steps,
		Timeout:      pcfg.Timeout,
		Warmup:       o.min,
		LogDir:       pcfg.LogDir,
		KeepAfterOOM: o.keepAfterOOM,
		Fallback:     fresh,
		OnStart:      func(n, size int) { prog.TrialStarted(n, size, nil) },
		OnDone:       onDone,
		Warn:         prog.Warn,
	})
}
