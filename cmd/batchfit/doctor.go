package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/doctor"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/worker"
)

type doctorOptions struct {
	size, repeat, steps, max int
	timeout, startTimeout    time.Duration
	memoryLimit              string
	json, noFresh            bool
	logDir                   string
}

func newDoctorCommand(io *streams) *cobra.Command {
	var o doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor [flags] -- python -m batchfit.worker mymodule:Trial",
		Short: "Say why memory does not come back between trials in one process",
		Long: `Run a warm worker (python -m batchfit.worker MODULE:ATTR, see the Python
package's README) through a fixed protocol, and say why memory does not come
back between trials in one process:

  1. batch size --size, --repeat times: does anything stay allocated?
  2. doubling from twice --size until a trial runs out of memory (at most
     --max): what does the out-of-memory error leave behind?
  3. --size again: does it still fit, with the same peak?
  4. --size in a fresh process: does the worker's peak match?

Each finding comes with its numbers (torch's allocator counters; without CUDA,
the bytes of the tensors Python can reach), its likely cause and a fix.

Exit codes:
  0    the protocol ran; read the findings
  1    error: the worker did not start
  2    usage: bad flags or arguments
  130  interrupted (Ctrl-C); the worker was stopped`,
		Example: `  batchfit doctor -- python -m batchfit.worker mymodel:Trial
  batchfit doctor --size 64 --memory-limit 24GiB -- \
      python -m batchfit.worker train.py:Trial
  batchfit doctor --json -- python -m batchfit.worker mymodel`,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || cmd.ArgsLenAtDash() != 0 {
				return usageError("put the worker command after --: batchfit doctor -- python -m batchfit.worker mymodule:Trial", "no worker command")
			}
			return o.run(cmd, io, args)
		}),
	}
	fs := cmd.Flags()
	fs.IntVar(&o.size, "size", 8, "the batch size that is repeated, and the start of the doubling")
	fs.IntVar(&o.repeat, "repeat", doctor.DefaultRepeat, "how many times --size runs before the hunt for an out-of-memory size")
	fs.IntVar(&o.steps, "steps", doctor.DefaultSteps, "training steps per trial")
	fs.IntVar(&o.max, "max", doctor.DefaultMaxSize, "the largest batch size the doubling tries")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "time limit per trial")
	fs.DurationVar(&o.startTimeout, "start-timeout", worker.DefaultStartTimeout, "time limit for the worker to import, build the model and warm up")
	// The worker and the fresh trial cap the framework's allocator only.
	memoryLimitFlag(fs, &o.memoryLimit, limit.ScopeAllocator)
	fs.BoolVar(&o.json, "json", false, "print the report as one JSON document (docs/json.md)")
	fs.BoolVar(&o.noFresh, "no-fresh", false, "skip the fresh-process comparison")
	fs.StringVar(&o.logDir, "log-dir", "", "keep the worker's and the fresh trial's output in a new folder under this `folder`, linked as latest (default: a temporary folder, kept only when the worker fails to start)")
	return cmd
}

func (o *doctorOptions) validate() error {
	switch {
	case o.size < 1:
		return usageError("give --size a positive batch size", "--size must be at least 1, got %d", o.size)
	case o.repeat < 1:
		return usageError("--repeat counts runs of --size: 1 or more", "--repeat must be at least 1, got %d", o.repeat)
	case o.steps < 1:
		return usageError("give --steps a positive number of training steps", "--steps must be at least 1, got %d", o.steps)
	case o.max < o.size:
		return usageError("--max bounds the doubling from --size", "--max %d is below --size %d", o.max, o.size)
	case o.timeout <= 0 || o.startTimeout <= 0:
		return usageError("give --timeout and --start-timeout positive durations such as 10m", "time limits must be positive")
	}
	return nil
}

func (o *doctorOptions) run(cmd *cobra.Command, io *streams, argv []string) error {
	if err := o.validate(); err != nil {
		return err
	}
	// The worker and the fresh trial run here.
	if err := checkPlatform(); err != nil {
		return err
	}
	t, err := newTarget(argv, adapter.FrameworkAuto, "")
	if err != nil {
		return err
	}
	defer t.backend.Close()
	memLimit, err := limit.Parse(o.memoryLimit)
	if err != nil {
		return err
	}
	r, err := doctor.RunCommand(cmd.Context(), doctor.CommandConfig{
		Command:      argv,
		Protocol:     doctor.Config{Size: o.size, Repeat: o.repeat, Steps: o.steps, MaxSize: o.max, Timeout: o.timeout},
		StartTimeout: o.startTimeout,
		MemoryLimit:  memLimit,
		NoFresh:      o.noFresh,
		LogDir:       o.logDir,
		GPU:          t.backend,
		Notice:       func(msg string) { fmt.Fprintf(io.stderr, "batchfit: %s\n", msg) },
	})
	if o.json && r != nil {
		io.document().Doctor = r
	}
	if err != nil || o.json {
		return err
	}
	return doctor.WriteText(io.stdout, r)
}
