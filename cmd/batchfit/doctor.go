package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/doctor"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/units"
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
		Short: "Find out why memory does not come back between trials in one process",
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
  batchfit doctor --size 64 --memory-limit 24GiB -- python -m batchfit.worker train.py:Trial
  batchfit doctor --json -- python -m batchfit.worker mymodel`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || cmd.ArgsLenAtDash() != 0 {
				return usageError("put the worker command after --: batchfit doctor -- python -m batchfit.worker mymodule:Trial", "no worker command")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), io, args)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&o.size, "size", 8, "the batch size that is repeated, and the start of the doubling")
	fs.IntVar(&o.repeat, "repeat", doctor.DefaultRepeat, "how many times --size runs before the hunt for an out-of-memory size")
	fs.IntVar(&o.steps, "steps", doctor.DefaultSteps, "training steps per trial")
	fs.IntVar(&o.max, "max", doctor.DefaultMaxSize, "the largest batch size the doubling tries")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "time limit per trial")
	fs.DurationVar(&o.startTimeout, "start-timeout", worker.DefaultStartTimeout, "time limit for the worker to import, build the model and warm up")
	fs.StringVar(&o.memoryLimit, "memory-limit", "", "emulate a smaller card: a size (24GiB, 40GB) or a share of the GPU (80%)")
	fs.BoolVar(&o.json, "json", false, "print the whole report as JSON")
	fs.BoolVar(&o.noFresh, "no-fresh", false, "skip the fresh-process comparison")
	fs.StringVar(&o.logDir, "log-dir", "", "keep the worker's and the fresh trial's output here (default: a temporary folder, kept only when the worker fails to start)")
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

func (o *doctorOptions) run(ctx context.Context, io *streams, argv []string) error {
	if err := o.validate(); err != nil {
		return err
	}
	t, err := commandTarget(argv, false)
	if err != nil {
		return err
	}
	var devices []gpu.Device
	if t.backend != nil {
		defer t.backend.Close()
		if devices, err = t.backend.Devices(); err != nil {
			return failure(exitError, "", fmt.Errorf("list GPUs: %w", err))
		}
	}
	so := searchOptions{memoryLimit: o.memoryLimit, logDir: o.logDir}
	limit, fraction, err := so.limit(devices)
	if err != nil {
		return err
	}
	logDir, keepLogs, err := so.openLogDir()
	if err != nil {
		return err
	}
	defer func() {
		if !keepLogs {
			os.RemoveAll(logDir)
		}
	}()
	pythonPath, err := adapter.Install(filepath.Join(logDir, "adapter"))
	if err != nil {
		return failure(exitError, "", fmt.Errorf("install the Python package: %w", err))
	}
	dir, _ := os.Getwd()
	base := os.Environ()
	env := worker.Environ(base, pythonPath, fraction)

	fmt.Fprintf(io.stderr, "batchfit: doctor: starting the worker: %s\n", strings.Join(argv, " "))
	stderrLog := filepath.Join(logDir, "worker.err")
	w, err := worker.Start(ctx, argv, env, worker.Options{
		Dir:          dir,
		StdoutPath:   filepath.Join(logDir, "worker.out"),
		StderrPath:   stderrLog,
		StartTimeout: o.startTimeout,
	})
	if err != nil {
		if ctx.Err() != nil {
			return failure(exitInterrupted, "", errors.New("interrupted; the worker was stopped"))
		}
		keepLogs = true
		return failure(exitError, startHint(err, stderrLog), err)
	}
	h := w.Hello()
	fmt.Fprintf(io.stderr, "batchfit: doctor: worker %d ready on %s after %.1fs (%d warm-up step(s) at batch size %d)\n",
		h.PID, h.Device, h.SetupSeconds, h.WarmupSteps, h.WarmupSize)

	cfg := doctor.Config{
		Size: o.size, Repeat: o.repeat, Steps: o.steps, MaxSize: o.max, Timeout: o.timeout,
		OnTrial: func(tr doctor.Trial) {
			fmt.Fprintf(io.stderr, "batchfit: doctor: trial %d (%s) batch %d: %s, %s retained\n",
				tr.ID, tr.Phase, tr.Size, tr.Outcome, units.SignedBytes(tr.RetainedBytes))
		},
	}
	if !o.noFresh {
		fresh := probe.New(probe.Config{
			Command: argv, Env: base, Dir: dir, Steps: o.steps, Timeout: o.timeout, LogDir: logDir,
			PythonPath: pythonPath, MemoryLimit: limit, MemoryFraction: fraction,
		})
		cfg.Fresh = func(ctx context.Context, size int) (search.Observation, error) {
			fmt.Fprintf(io.stderr, "batchfit: doctor: batch %d in a fresh process\n", size)
			obs, err := fresh.Probe(ctx, []int{size})
			if err != nil {
				return search.Observation{}, err
			}
			return obs[0], nil
		}
	}
	r, err := doctor.Run(ctx, cfg, w)
	if err != nil {
		if ctx.Err() != nil {
			return failure(exitInterrupted, "", errors.New("interrupted; the worker was stopped"))
		}
		return failure(exitError, "", err)
	}
	if o.json {
		enc := json.NewEncoder(io.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return failure(exitError, "", err)
		}
	} else if err := doctor.WriteText(io.stdout, r); err != nil {
		return failure(exitError, "", err)
	}
	if keepLogs {
		fmt.Fprintf(io.stderr, "batchfit: doctor: the worker's output is in %s\n", logDir)
	}
	return nil
}

// startHint shows why the worker did not start: the end of its traceback or
// of its stderr, and where the whole log is.
func startHint(err error, stderrLog string) string {
	var se *worker.StartError
	if !errors.As(err, &se) {
		return ""
	}
	switch {
	case se.Stage == "start":
		return "check the worker command: batchfit doctor -- python -m batchfit.worker mymodule:Trial"
	case se.Stage == "warmup" && se.Outcome == "oom":
		return "even the warm-up batch does not fit; set BATCHFIT_WORKER_WARMUP to a smaller size, or check what else uses the GPU"
	}
	text := se.Traceback
	if text == "" {
		text = se.Tail
	}
	hint := fmt.Sprintf("the worker's output ends with:\n%s\nfull log: %s", indentTail(text, 15), stderrLog)
	if se.Stage == "warmup" {
		hint += "\nthe warm-up runs at BATCHFIT_WORKER_WARMUP (default 1); a model that cannot train on one sample (BatchNorm) needs a larger one"
	}
	return hint
}
