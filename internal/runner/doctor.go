package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/doctor"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/logdir"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/units"
	"github.com/batchfit/batchfit/internal/worker"
)

// DoctorConfig is one doctor run: a warm worker through doctor's protocol,
// then the same size in a fresh process.
type DoctorConfig struct {
	// Command starts the worker: python -m batchfit.worker module:Trial.
	Command []string
	Dir     string   // "" means batchfit's
	Env     []string // nil means os.Environ()
	// Protocol is doctor's protocol; its Fresh and OnTrial are set here.
	Protocol     doctor.Config
	StartTimeout time.Duration
	MemoryLimit  Limit
	NoFresh      bool   // skip the fresh-process comparison
	LogDir       string // kept; "" is a temporary folder, kept only when the worker fails to start
}

// Doctor runs the worker through the protocol and returns what it found.
// Deps.GPU gives the card a memory limit is taken from; Deps.Notice shows
// each step.
func Doctor(ctx context.Context, cfg DoctorConfig, deps Deps) (*doctor.Report, error) {
	run := Config{Command: cfg.Command, Dir: cfg.Dir, Env: cfg.Env, Framework: adapter.Torch{}}
	run, deps = withDefaults(run, deps)
	devices, err := deps.GPU.Devices()
	if err != nil {
		return nil, fmt.Errorf("list GPUs: %w", err)
	}
	limit, err := cfg.MemoryLimit.Resolve(devices)
	if err != nil {
		return nil, err
	}
	var total uint64
	if len(devices) > 0 {
		total = devices[0].Total
	}
	logDir, keep, err := logdir.Open(cfg.LogDir, "", time.Now())
	if err != nil {
		return nil, err
	}
	defer func() {
		if !keep {
			os.RemoveAll(logDir)
		}
	}()
	pythonPath, err := adapter.Install(filepath.Join(logDir, "adapter"))
	if err != nil {
		return nil, fmt.Errorf("install the Python package: %w", err)
	}
	w, err := startDoctorWorker(ctx, cfg, run, deps, worker.Environ(run.Env, pythonPath, run.Framework, limit, total), logDir)
	if err != nil {
		keep = ctx.Err() == nil
		return nil, err
	}
	protocol := cfg.Protocol
	protocol.OnTrial = func(t doctor.Trial) {
		deps.Notice(fmt.Sprintf("doctor: trial %d (%s) batch %d: %s, %s retained", t.ID, t.Phase, t.Size, t.Outcome, units.SignedBytes(t.RetainedBytes)))
	}
	if !cfg.NoFresh {
		fresh := probe.New(probe.Config{
			Command: cfg.Command, Env: run.Env, Dir: run.Dir, Steps: protocol.Steps, Timeout: protocol.Timeout, LogDir: logDir,
			PythonPath: pythonPath, Framework: run.Framework, MemoryLimit: limit, DeviceTotal: total,
		})
		protocol.Fresh = func(ctx context.Context, size int) (search.Observation, error) {
			deps.Notice(fmt.Sprintf("doctor: batch %d in a fresh process", size))
			obs, err := fresh.Probe(ctx, search.Request{Sizes: []int{size}})
			if err != nil {
				return search.Observation{}, err
			}
			return obs[0], nil
		}
	}
	r, err := doctor.Run(ctx, protocol, w)
	if err != nil && ctx.Err() != nil {
		return nil, errWorkerInterrupted
	}
	if keep {
		deps.Notice("doctor: the worker's output is in " + logDir)
	}
	return r, err
}

// startDoctorWorker starts the worker and says so.
func startDoctorWorker(ctx context.Context, cfg DoctorConfig, run Config, deps Deps, env []string, logDir string) (*worker.Worker, error) {
	deps.Notice("doctor: starting the worker: " + strings.Join(cfg.Command, " "))
	stderrLog := filepath.Join(logDir, "worker.err")
	w, err := worker.Start(ctx, cfg.Command, env, worker.Options{
		Dir:          run.Dir,
		StdoutPath:   filepath.Join(logDir, "worker.out"),
		StderrPath:   stderrLog,
		StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, errWorkerInterrupted
		}
		return nil, hint.With(err, startHint(err, "full log: "+stderrLog))
	}
	h := w.Hello()
	deps.Notice(fmt.Sprintf("doctor: worker %d ready on %s after %.1fs (%d warm-up step(s) at batch size %d)",
		h.PID, h.Device, h.SetupSeconds, h.WarmupSteps, h.WarmupSize))
	return w, nil
}

// startHint shows why the worker did not start: the end of its traceback or
// of its stderr, and where, a line, the whole log is.
func startHint(err error, where string) string {
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
	hint := fmt.Sprintf("the worker's output ends with:\n%s\n%s", IndentTail(text, 15), where)
	if se.Stage == "warmup" {
		hint += "\nthe warm-up runs at BATCHFIT_WORKER_WARMUP (default 1); a model that cannot train on one sample (BatchNorm) needs a larger one"
	}
	return hint
}
