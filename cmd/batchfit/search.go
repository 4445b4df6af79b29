package main

import (
	"context"
	"errors"
	"fmt"
	goio "io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/claim"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/gpugroup"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/hold"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/live"
	"github.com/batchfit/batchfit/internal/outfile"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/report"
	"github.com/batchfit/batchfit/internal/runner"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/store"
	"github.com/batchfit/batchfit/internal/units"
)

// searchOptions are the flags shared by search and demo.
type searchOptions struct {
	min, max, start, multipleOf int
	steps                       int
	worstCase                   string
	timeout, soak               time.Duration
	confirm                     int
	strategy                    string
	memoryLimit                 string
	limitScope                  string
	margin                      string
	globalBatch, trainGPUs      int
	json, quiet                 bool
	logDir                      string
	framework                   string
	torch                       bool
	fresh                       bool
	allowBusyGPU                bool
	historyEnv                  []string
	oldHistoryEnv               []string // --cache-env, deprecated
	historyMaxAge               maxAge
	gpus                        string
	worker, keepAfterOOM        bool
	preload                     bool // asked for explicitly (the default anyway)
	noPreload                   bool
	throughput                  bool
	verbose                     bool
	events                      string // --events: the file the JSON lines go to
	eventsOut                   goio.Writer
	gpusPerTrial                int
	perGPUModel                 bool
	db                          dbOptions
	out                         outputOptions
	exec                        executorOptions
	// ws shows the warnings on stderr, -q or not (o.warnings).
	ws *warnings
	// flags are the parsed flags, to tell a flag given as its default
	// value from one left out.
	flags *pflag.FlagSet
}

// Bounds of the flags that multiply a search's work. Past them a value is
// a typing mistake rather than a plan, and would hold the GPU for days.
const (
	maxConfirm = 100
	maxSteps   = 100_000
	maxSoak    = 24 * time.Hour
)

func (o *searchOptions) register(fs *pflag.FlagSet) {
	o.flags = fs
	fs.IntVar(&o.min, "min", 1, "smallest batch size to consider")
	fs.IntVar(&o.max, "max", 65536, "largest batch size to consider")
	fs.IntVar(&o.start, "start", 0, "first batch size to try, a guess of the answer (default: chosen by the strategy)")
	fs.IntVar(&o.multipleOf, "multiple-of", 1, "only consider batch sizes that are multiples of this")
	fs.IntVar(&o.steps, "steps", 3, "training steps per trial (BATCHFIT_STEPS): the adapter stops a PyTorch program after `N` optimizer steps (JAX: optax updates, see docs/manual.md); 0 lets it run to its end")
	fs.StringVar(&o.worstCase, "worst-case", "on", "on: where a program's batch shapes vary (padding to the longest sequence, say), each trial runs the loader's largest batches first (BATCHFIT_WORST_CASE=1), or runs on until the largest shape stops growing where the loader cannot be reordered; off: the batches come in the program's order, and the answer holds only for the shapes its steps met")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "time limit per trial; a trial past it is killed and counts as not fitting")
	fs.DurationVar(&o.soak, "soak", 0, "after the search, run the answer in a fresh process for this long (10m), to the program's end at most, and show its memory per step; an out-of-memory soak moves the answer down")
	fs.BoolVar(&o.throughput, "throughput", false, "after the search, measure samples/s at the answer and at ¾, ½ and ¼ of it in fresh trials of 14 steps (3 left out as warm-up), and recommend a smaller size only when it is faster beyond the measured noise")
	fs.IntVar(&o.confirm, "confirm", 0, "re-run the answer this many more times in fresh processes")
	fs.StringVar(&o.strategy, "strategy", "model", "search strategy: model (memory-model guided) or bisect")
	fs.BoolVar(&o.fresh, "fresh", false, "search again even when the history has the answer")
	fs.BoolVar(&o.worker, "worker", false, "run trials in a warm PyTorch worker (python -m batchfit.worker module:Trial) whose reset is verified; the answer is confirmed in fresh processes")
	fs.BoolVar(&o.keepAfterOOM, "keep-after-oom", false, "with --worker, keep a worker after an out-of-memory trial when its reset verified")
	fs.BoolVar(&o.noPreload, "no-preload", false, "start every trial of a Python command from scratch, instead of forking it from a server that has imported the program's third-party packages (torch, ...) but not started CUDA (the default: each forked trial is still a fresh process of its own, with its own CUDA context)")
	fs.BoolVar(&o.verbose, "verbose", false, "also show details that change no answer: the packages the fork server preloaded, and those it left out and why")
	fs.BoolVar(&o.preload, "preload", false, "fork the trials of a Python command from a preloading server (the default; see --no-preload)")
	fs.MarkHidden("preload")
	flagGroup(fs, groupCore, "min", "max", "start", "multiple-of", "steps", "worst-case", "timeout", "soak", "throughput", "confirm", "strategy", "fresh", "worker", "keep-after-oom", "no-preload", "preload")

	memoryLimitFlag(fs, &o.memoryLimit, limit.ScopeProcess)
	fs.StringVar(&o.limitScope, "memory-limit-scope", string(limit.ScopeProcess), "what --memory-limit holds: process (the whole process, CUDA context included, as on a real card) or allocator (only the framework's allocator, as PYTORCH_CUDA_ALLOC_CONF's per_process_memory_fraction does)")
	fs.StringVar(&o.margin, "margin", "", "also report the largest size that leaves this `share` of memory free: 10% or 0.10 (up to 90%); with -q, print that size")
	flagGroup(fs, groupMemory, "memory-limit", "memory-limit-scope", "margin")

	fs.IntVar(&o.globalBatch, "global-batch", 0, "also say how to train at this global batch: the largest per-device size that fits × gradient accumulation steps × --train-gpus")
	fs.IntVar(&o.trainGPUs, "train-gpus", 0, "with --global-batch, the GPUs the training runs on (default: --gpus-per-trial)")
	flagGroup(fs, groupOutput, "global-batch", "train-gpus", "verbose")

	o.historyMaxAge = maxAge(30 * 24 * time.Hour)
	fs.Var(&o.historyMaxAge, "history-max-age", "use an answer from the history only when it is at most this old (30d, 12h); 0 never uses one")
	fs.StringArrayVar(&o.historyEnv, "history-env", nil, "an environment variable `NAME` the program reads that changes its memory: a change of its value searches again instead of answering from the history (repeatable; PYTORCH_*, CUDA_*, XLA_*, TF_*, NCCL_*, OMP_*, BATCHFIT_SHAPE_PATIENCE and BATCHFIT_SHAPE_SECONDS always count)")
	// The names of before the store was called the history alone.
	fs.Var(&o.historyMaxAge, "cache-max-age", "deprecated: --history-max-age")
	fs.StringArrayVar(&o.oldHistoryEnv, "cache-env", nil, "deprecated: --history-env")
	fs.MarkHidden("cache-max-age")
	fs.MarkHidden("cache-env")
	fs.BoolVar(&o.json, "json", false, "print one JSON document: the run record, or the error (docs/json.md)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print only the answer")
	fs.StringVar(&o.events, "events", "", "also write the search's progress to this `file` as JSON lines, one event a line, for a program to follow (docs/json.md)")
	fs.StringVar(&o.logDir, "log-dir", "", "keep each run's trial logs in a new folder under this `folder`, linked as latest (default: a temporary folder, kept only when something failed unexpectedly)")
	o.out.register(fs)
	o.db.register(fs, true)
	flagGroup(fs, groupOutput, "json", "quiet", "events", "log-dir", "report", "plot", "db", "no-db", "history-max-age", "history-env")

	fs.StringVar(&o.gpus, "gpus", "", "run trials in parallel, each pinned to its own GPU(s): a list such as 0,1,2,3, or all")
	fs.IntVar(&o.gpusPerTrial, "gpus-per-trial", 1, "GPUs one trial spans (torchrun --nproc_per_node=N); the batch size is per GPU")
	fs.BoolVar(&o.perGPUModel, "per-gpu-model", false, "with several GPU models in --gpus (or types in --constraint), run one search per model and report a table")
	fs.BoolVar(&o.allowBusyGPU, "allow-busy-gpu", false, "search even when other processes hold memory on the GPU, or another search uses it (the answer may be low; the run records them)")
	flagGroup(fs, groupGPUs, "gpus", "gpus-per-trial", "per-gpu-model", "allow-busy-gpu")

	o.exec.register(fs)
}

// memoryLimitFlag registers --memory-limit in p for a command whose limit
// holds scope; limit.Parse reads it.
func memoryLimitFlag(fs *pflag.FlagSet, p *string, scope limit.Scope) {
	fs.StringVar(p, "memory-limit", "", limit.Usage(scope))
}

func newSearchCommand(io *streams) *cobra.Command {
	var o searchOptions
	o.db.stderr = io.stderr
	cmd := &cobra.Command{
		Use:   "search [flags] -- COMMAND [ARGS...]",
		Short: "Find the largest batch size COMMAND runs at",
		Long: `Run COMMAND at different batch sizes, each trial in a fresh process, and report
the largest size that runs. "{}" in ARGS is replaced by the batch size (no
shell is involved); every trial also gets BATCHFIT_BATCH_SIZE, BATCHFIT_STEPS,
BATCHFIT_WORST_CASE and BATCHFIT_TRIAL in its environment. A Python program
is stopped after --steps training steps (PyTorch optimizer steps; JAX: see
docs/manual.md), so an unmodified trainer need not be told how long to run;
--steps 0 lets it run to its own end.

The answer is exact: it was seen to run, and the next size up was seen to fail.

` + outputHelp + `

` + exitCodesHelp,
		Example: `  batchfit search -- python train.py --batch-size {} --max-steps 3
  batchfit search --memory-limit 24GiB -- python train.py --batch-size {}
  batchfit search -q --multiple-of 8 -- ./train.sh
  batchfit search --worker -- python -m batchfit.worker mymodule:Trial
  batchfit search --gpus 0,1 --gpus-per-trial 2 -- \
      torchrun --nproc_per_node=2 train.py --batch-size {}
  batchfit search --executor slurm --jobs 4 --partition gpu -- \
      python train.py --batch-size {}`,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || cmd.ArgsLenAtDash() != 0 {
				return usageError("put the training command after --: batchfit search -- python train.py --batch-size {}", "no command to search")
			}
			t, err := o.commandTarget(args)
			if err != nil {
				return err
			}
			return o.execute(cmd.Context(), io, t)
		}),
	}
	fs := cmd.Flags()
	o.register(fs)
	fs.StringVar(&o.framework, "framework", adapter.FrameworkAuto, "the command's framework, for its memory figures and --memory-limit: auto (every framework's for Python commands), torch, jax, tensorflow or none")
	fs.BoolVar(&o.torch, "torch", false, "same as --framework torch")
	flagGroup(fs, groupMemory, "framework", "torch")
	return cmd
}

// target is what a search runs: a real command on real GPUs, or the
// simulator.
type target struct {
	command []string
	// shown is the command as recorded and fingerprinted, when it differs
	// from the argv that runs (the demo's child has temporary paths).
	shown     []string
	backend   gpu.Backend
	gpuHint   string // why there are no GPU figures
	simulated bool
	framework adapter.Framework
}

// commandTarget checks the user's command, chooses its framework from
// --framework or --torch, and finds the GPUs.
func (o *searchOptions) commandTarget(argv []string) (*target, error) {
	if o.torch {
		return newTarget(argv, adapter.FrameworkTorch, "--torch")
	}
	return newTarget(argv, o.framework, "--framework")
}

// newTarget checks a command, chooses its framework (the one named by flag,
// or auto) and finds the GPUs.
func newTarget(argv []string, framework, flag string) (*target, error) {
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, usageError("check the command's spelling, that it is installed, and that it is executable", "cannot run %q: %v", argv[0], unwrapExec(err))
	}
	fw, err := adapter.Choose(framework, argv)
	if err != nil {
		return nil, usageError(hint.Of(err), "%s", err)
	}
	if fw.Hooked() && !adapter.IsPython(argv) {
		return nil, usageError(fmt.Sprintf("%s needs a Python command (python, torchrun, accelerate ...); leave it out for other programs", flag),
			"%s: %q is not a Python interpreter", flag, argv[0])
	}
	t := &target{command: argv, framework: fw}
	t.backend, err = gpu.Detect()
	if err != nil {
		t.gpuHint = err.Error()
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
	defer t.backend.Close()
	cfg, groups, err := o.prepare(t)
	if err != nil {
		return err
	}
	deps, closeDeps, err := o.deps(ctx, io, t)
	if err != nil {
		return err
	}
	defer closeDeps()
	if t.gpuHint != "" && !o.quiet {
		fmt.Fprintf(io.stderr, "batchfit: hint: %s\n", t.gpuHint)
	}
	ws := o.warnings(io)
	var runs []*record.Run
	var exit error
	for _, g := range groups {
		if len(groups) > 1 && !o.quiet {
			fmt.Fprintf(io.stderr, "batchfit: searching on %s (GPUs %s)\n", g.Name, joinInts(g.Indexes()))
		}
		cfg.Group = g
		run, err := runner.Run(ctx, cfg, deps)
		if run != nil {
			o.planGlobalBatch(run)
			if len(run.Flaky) > 0 {
				ws.line(fmt.Sprintf("warning: the boundary is flaky: %s; %d is the safe side, not exact", run.FlakyText(), run.Answer))
			}
			if o.quiet {
				// The summary that shows the rest is not printed.
				ws.run(run)
			} else if run.AtRisk != nil {
				// With -q the run's warnings say it (caveat.Risk).
				ws.line(fmt.Sprintf("warning: %s; %d is the safe side, not exact", run.AtRiskText(), run.Answer))
			}
			runs = append(runs, run)
			if werr := o.out.write(run, len(groups) > 1); werr != nil && exit == nil {
				exit = werr
			}
		}
		if err != nil {
			exit = err
			if ctx.Err() != nil {
				break
			}
		}
	}
	if len(runs) == 0 {
		return exit // nothing ran (refused before the first trial): nothing for stdout
	}
	if err := o.printRuns(io, runs); err != nil {
		return err
	}
	return exit
}

// prepare checks every flag before anything runs and returns the search's
// configuration and its groups of GPUs.
func (o *searchOptions) prepare(t *target) (runner.Config, []gpugroup.Group, error) {
	sc, err := o.searchConfig()
	if err != nil {
		return runner.Config{}, nil, err
	}
	if err := o.out.check(append(o.db.files(), outfile.Named{Flag: "--log-dir", Path: o.logDir})...); err != nil {
		return runner.Config{}, nil, err
	}
	kind, err := o.exec.kind(o)
	if err != nil {
		return runner.Config{}, nil, err
	}
	memLimit, err := limit.Parse(o.memoryLimit)
	if err != nil {
		return runner.Config{}, nil, err
	}
	if o.preload && o.noPreload {
		return runner.Config{}, nil, usageError("give one of --preload and --no-preload", "--preload and --no-preload contradict each other")
	}
	scope, err := limit.ParseScope(o.limitScope)
	if err != nil {
		return runner.Config{}, nil, err
	}
	devices, err := t.backend.Devices()
	if err != nil {
		return runner.Config{}, nil, fmt.Errorf("list GPUs: %w", err)
	}
	groups, err := kind.Groups(o, devices)
	if err != nil {
		return runner.Config{}, nil, err
	}
	cfg := runner.Config{
		Command: t.command, Shown: t.shown, Simulated: t.simulated, Framework: t.framework,
		Search: sc, Steps: o.steps, WorstCaseOff: o.worstCase == "off", Timeout: o.timeout, Soak: o.soak, Throughput: o.throughput, MemoryLimit: memLimit, MemoryLimitScope: scope,
		Preload: !o.noPreload, Verbose: o.verbose, Fresh: o.fresh, AllowBusyGPU: o.allowBusyGPU, CacheMaxAge: time.Duration(o.historyMaxAge), CacheEnv: o.envNames(), LogDir: o.logDir, LogBase: kind.LogBase(), Version: currentVersion(),
	}
	if o.worker {
		cfg.Worker = &runner.WorkerOptions{KeepAfterOOM: o.keepAfterOOM}
	}
	return cfg, groups, nil
}

// deps wires the outside systems of a search: the GPU, the history, the
// executor and the terminal.
func (o *searchOptions) deps(ctx context.Context, io *streams, t *target) (runner.Deps, func(), error) {
	db, err := o.db.open(ctx)
	if err != nil {
		return runner.Deps{}, nil, err
	}
	closeEvents := func() {}
	if o.events != "" {
		// Opened for writing, never truncated by a rename: the file may be a
		// pipe the caller reads (/dev/fd/N).
		f, err := os.OpenFile(o.events, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			db.Close()
			return runner.Deps{}, nil, fmt.Errorf("open --events file: %w", err)
		}
		o.eventsOut, closeEvents = f, func() { f.Close() }
		// A pipe passed as /dev/fd/N stays open in batchfit as N too: keep
		// it out of the trials, so that its reader sees its end with ours.
		if n, ok := strings.CutPrefix(o.events, "/dev/fd/"); ok {
			if fd, err := strconv.Atoi(n); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
	}
	kind, _ := o.exec.kind(o)
	// The simulated card holds its own memory; a real one through CUDA.
	var holder hold.Holder = hold.CUDA{}
	if h, ok := t.backend.(hold.Holder); ok {
		holder = h
	}
	deps := runner.Deps{
		GPU:      t.backend,
		Holder:   holder,
		Store:    db,
		Claims:   gpuClaims(),
		Executor: func(g gpugroup.Group) (probe.Executor, error) { return kind.Executor(o, g) },
		Progress: func(info runner.ProgressInfo) runner.Progress { return o.progress(io, info) },
		Notice: func(msg string) {
			if !o.quiet || isWarning(msg) {
				o.warnings(io).line(msg)
			}
		},
		// Even with -q: an answer from the history must never pass for a
		// fresh one.
		Alert: o.warnings(io).line,
	}
	return deps, func() { db.Close(); closeEvents() }, nil
}

// warnings is where the search's warnings go: stderr, each once.
func (o *searchOptions) warnings(io *streams) *warnings {
	if o.ws == nil {
		o.ws = newWarnings(io.stderr)
	}
	return o.ws
}

// gpuClaims are the GPU locks every batchfit of this user shares: beside
// the history's default file whatever --db says, and with --no-db too, so
// that searches with different histories, or none, claim the same GPUs.
// Without a cache dir there is no place for them, and nothing is claimed.
func gpuClaims() runner.Claimer {
	path, err := store.DefaultPath()
	if err != nil {
		return claim.None{}
	}
	return claim.Locks{Dir: filepath.Join(filepath.Dir(path), "gpus")}
}

func joinInts(xs []int) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(x)
	}
	return s
}

// quietSize is the size -q prints: the answer, or with --margin the size
// that leaves that share free; 0 when there is none.
func (o *searchOptions) quietSize(run *record.Run) int {
	if run.Status != record.Found {
		return 0
	}
	if o.margin != "" {
		return run.Margin
	}
	return run.Answer
}

// planGlobalBatch adds to a run that found its answer how to train at
// --global-batch.
func (o *searchOptions) planGlobalBatch(run *record.Run) {
	if o.globalBatch <= 0 || run.Status != record.Found {
		return
	}
	devices := o.trainGPUs
	if devices == 0 {
		devices = max(o.gpusPerTrial, 1)
	}
	if g, ok := record.PlanGlobalBatch(o.globalBatch, devices, run.Answer, max(o.multipleOf, 1)); ok {
		run.GlobalBatch = &g
	}
}

// printRuns prints the result on stdout (outputHelp): with --json the runs
// go into the document run prints with the error, if any,
// with -q the answer (or the --margin size) or nothing, and otherwise the
// summary of each run that reached an outcome.
func (o *searchOptions) printRuns(io *streams, runs []*record.Run) error {
	if o.json {
		doc := io.document()
		doc.Runs = append(doc.Runs, runs...)
		return nil
	}
	if o.quiet {
		if len(runs) == 1 {
			if size := o.quietSize(runs[0]); size > 0 {
				_, err := fmt.Fprintln(io.stdout, size)
				return err
			}
			return nil
		}
		for _, r := range runs {
			if !reached(r) {
				continue
			}
			name, answer := "-", "-"
			if r.GPU != nil && len(r.GPU.Devices) > 0 {
				name = r.GPU.Devices[0].Name
			}
			if r.Status == record.Found {
				answer = strconv.Itoa(r.Answer)
			}
			fmt.Fprintf(io.stdout, "%s\t%s\n", name, answer)
		}
		return nil
	}
	var shown []*record.Run
	for _, r := range runs {
		if reached(r) {
			shown = append(shown, r)
		}
	}
	switch len(shown) {
	case 0:
		return nil
	case 1:
		if len(runs) == 1 && o.liveOnSameTerminal(io) {
			// The live display's last frame above shows every trial.
			return report.WriteSummaryHead(io.stdout, shown[0])
		}
		if len(runs) == 1 {
			return report.WriteSummary(io.stdout, shown[0])
		}
	}
	return report.WriteModelTable(io.stdout, shown)
}

// liveOnSameTerminal says whether the live display drew the trials on the
// terminal that stdout also shows.
func (o *searchOptions) liveOnSameTerminal(io *streams) bool {
	return !o.quiet && isTerminal(io.stderr) && isTerminal(io.stdout)
}

// reached says whether a run has a result to show: an answer, nothing
// fits, or a search stopped (a crash, Ctrl-C) after trials that say
// something. A search that failed before its first trial has only its
// error, which goes to stderr.
func reached(r *record.Run) bool {
	switch r.Status {
	case record.Found, record.NothingFits:
		return true
	case record.Failed, record.Interrupted:
		return len(r.Trials) > 0
	}
	return false
}

// envNames are the variables of --history-env and of its old name.
func (o *searchOptions) envNames() []string {
	return append(slices.Clone(o.oldHistoryEnv), o.historyEnv...)
}

// validEnvName reports whether name can name an environment variable as a
// shell sets it: letters, digits and '_', not starting with a digit.
func validEnvName(name string) bool {
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return name != ""
}

// given reports whether the flag name was on the command line.
func (o *searchOptions) given(name string) bool {
	return o.flags != nil && o.flags.Changed(name)
}

// parseMargin reads --margin as a percentage: "10%" or the fraction "0.10".
// A bare number of 1 or more is refused: "10" could mean either (Lightning's
// margin is a fraction), and a misread margin is a wrong answer.
func parseMargin(s string) (float64, error) {
	const hint = "give --margin as a percentage (10%) or a fraction (0.10) of memory to leave free, up to 90%"
	if s == "" {
		return 0, nil
	}
	num, percent := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, usageError(hint, "--margin %q is not a number", s)
	case !percent && v >= 1:
		return 0, usageError(fmt.Sprintf("write %g%% for a percentage, or %g for a fraction", v, v/100), "--margin %s is ambiguous", s)
	case !percent:
		v *= 100
	}
	if !(v >= 0 && v <= 90) {
		return 0, usageError(hint, "--margin %s is outside 0-90%%", s)
	}
	return v, nil
}

// searchConfig validates the flags that shape the search.
func (o *searchOptions) searchConfig() (search.Config, error) {
	cfg := search.Config{
		Min: o.min, Max: o.max, Start: o.start, MultipleOf: o.multipleOf,
		Confirm: o.confirm, Strategy: search.Strategy(o.strategy), Parallel: 1,
	}
	margin, err := parseMargin(o.margin)
	if err != nil {
		return cfg, err
	}
	cfg.MarginPercent = margin
	envNames := o.envNames()
	badEnv := slices.IndexFunc(envNames, func(name string) bool { return !validEnvName(name) })
	switch {
	case o.json && o.quiet:
		return cfg, usageError("choose one: --json prints the whole record, -q only the answer", "--json and -q cannot be combined")
	case o.strategy != "model" && o.strategy != "bisect":
		return cfg, usageError("use --strategy model or --strategy bisect", "unknown strategy %q", o.strategy)
	case o.multipleOf < 1:
		return cfg, usageError("--multiple-of 8 keeps every size a multiple of 8; 1 allows any size", "--multiple-of must be at least 1, got %d", o.multipleOf)
	case o.min < 1 || o.max < 1 || o.start < 0 || (o.start == 0 && o.given("start")):
		return cfg, usageError("batch sizes are positive: check --min, --max and --start", "--min, --max and --start must be positive")
	case o.steps < 0:
		return cfg, usageError("give --steps a number of training steps, or 0 to let the program run to its end", "--steps must not be negative, got %d", o.steps)
	case o.steps > maxSteps:
		return cfg, usageError(fmt.Sprintf("give at most %d, or --steps 0 to let the program run to its end", maxSteps), "--steps %d is more steps than a trial needs", o.steps)
	case o.worstCase != "on" && o.worstCase != "off":
		return cfg, usageError("use --worst-case on (run the largest batches first, the default) or --worst-case off", "--worst-case %q is neither on nor off", o.worstCase)
	case o.timeout <= 0:
		return cfg, usageError("give --timeout a positive duration such as 10m", "--timeout must be positive, got %s", o.timeout)
	case o.soak < 0:
		return cfg, usageError("give --soak a duration such as 10m, or leave it out", "--soak must not be negative, got %s", o.soak)
	case o.soak > maxSoak:
		return cfg, usageError(fmt.Sprintf("give --soak at most %s; it stops at the program's end anyway", units.RoughDuration(maxSoak.Seconds())), "--soak %s is longer than a soak needs", units.RoughDuration(o.soak.Seconds()))
	case o.confirm < 0:
		return cfg, usageError("--confirm counts extra runs of the answer: 0 or more", "--confirm must not be negative, got %d", o.confirm)
	case o.confirm > maxConfirm:
		return cfg, usageError(fmt.Sprintf("each run takes a trial's time; give at most %d", maxConfirm), "--confirm %d is more re-runs than a confirmation needs", o.confirm)
	case o.keepAfterOOM && !o.worker:
		return cfg, usageError("add --worker, or leave --keep-after-oom out: without a worker every trial is a fresh process", "--keep-after-oom needs --worker")
	case badEnv >= 0:
		return cfg, usageError("give --history-env the name of a variable, such as --history-env MODEL_SIZE", "--history-env %q is not a variable name", envNames[badEnv])
	case o.given("memory-limit-scope") && o.memoryLimit == "":
		return cfg, usageError("add --memory-limit 24GiB (or a card name), or leave --memory-limit-scope out", "--memory-limit-scope needs --memory-limit")
	case o.globalBatch < 0 || o.trainGPUs < 0:
		return cfg, usageError("--global-batch is the samples per optimizer step the training wants, --train-gpus the GPUs it runs on", "--global-batch and --train-gpus must not be negative")
	case o.trainGPUs > 0 && o.globalBatch == 0:
		return cfg, usageError("give the global batch to plan: --global-batch N", "--train-gpus needs --global-batch")
	}
	bounds := cfg
	bounds.MarginPercent = 0 // checked once the capacity is known
	if err := bounds.Validate(); err != nil {
		return cfg, usageError("check --min, --max, --start and --multiple-of", "%s", err)
	}
	return cfg, nil
}

// progress returns the live display on a terminal, plain lines otherwise,
// and nothing with --quiet; and the --events stream beside it.
func (o *searchOptions) progress(io *streams, info runner.ProgressInfo) runner.Progress {
	shown := o.display(io, info)
	if o.eventsOut == nil {
		return shown
	}
	opts := live.Options{Title: "batchfit search", GPU: info.GPU, Capacity: info.Capacity, Limit: info.Limit,
		AllocatorOnly: info.AllocatorOnly, Simulated: info.Simulated}
	if info.Simulated {
		opts.Title = "batchfit demo"
	}
	return runner.Progresses(shown, live.NewEvents(o.eventsOut, opts))
}

// display is the progress a person sees on stderr.
func (o *searchOptions) display(io *streams, info runner.ProgressInfo) runner.Progress {
	if o.quiet {
		return quietProgress{o.warnings(io)}
	}
	tty := isTerminal(io.stderr)
	opts := live.Options{
		Title: "batchfit search", Color: tty && os.Getenv("NO_COLOR") == "",
		GPU: info.GPU, Capacity: info.Capacity, Limit: info.Limit, AllocatorOnly: info.AllocatorOnly, Simulated: info.Simulated,
		MultipleOf: info.MultipleOf, Confirm: info.Confirm,
	}
	if info.Simulated {
		opts.Title = "batchfit demo"
	}
	if tty {
		return live.NewTTY(io.stderr, opts)
	}
	return live.NewPlain(io.stderr, opts)
}
