package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/logdir"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/runner"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/units"
	"github.com/batchfit/batchfit/internal/worker"
)

// ErrInterrupted is a doctor run stopped by its context (Ctrl-C) after the
// worker was stopped. It matches context.Canceled.
var ErrInterrupted error = interrupted("interrupted; the worker was stopped")

type interrupted string

func (e interrupted) Error() string      { return string(e) }
func (interrupted) Is(target error) bool { return target == context.Canceled }

// CommandConfig is one doctor run of a worker command: the worker through
// the protocol, then the same size in a fresh process.
type CommandConfig struct {
	// Command starts the worker: python -m batchfit.worker module:Trial.
	Command []string
	Dir     string   // "" means batchfit's
	Env     []string // nil means os.Environ()
	// Protocol is the protocol; its Fresh and OnTrial are set here.
	Protocol     Config
	StartTimeout time.Duration
	MemoryLimit  limit.Limit
	NoFresh      bool   // skip the fresh-process comparison
	LogDir       string // kept; "" is a temporary folder, kept only when the worker fails to start
	// GPU gives the card a memory limit is taken from; nil is gpu.Null.
	GPU gpu.Backend
	// Notice shows each step; nil shows nothing.
	Notice func(msg string)
}

// RunCommand starts the worker, runs it through the protocol and returns
// what it found.
func RunCommand(ctx context.Context, cfg CommandConfig) (*Report, error) {
	fw := adapter.Torch{}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.Dir == "" {
		cfg.Dir, _ = os.Getwd()
	}
	if cfg.GPU == nil {
		cfg.GPU = gpu.Null{}
	}
	if cfg.Notice == nil {
		cfg.Notice = func(string) {}
	}
	devices, err := cfg.GPU.Devices()
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
	w, err := startWorker(ctx, cfg, worker.Environ(cfg.Env, pythonPath, fw, limit, total), logDir)
	if err != nil {
		keep = ctx.Err() == nil
		return nil, err
	}
	protocol := cfg.Protocol
	protocol.OnTrial = func(t Trial) {
		cfg.Notice(fmt.Sprintf("doctor: trial %d (%s) batch %d: %s, %s retained", t.ID, t.Phase, t.Size, t.Outcome, units.SignedBytes(t.RetainedBytes)))
	}
	if !cfg.NoFresh {
		fresh := probe.New(probe.Config{
			Command: cfg.Command, Env: cfg.Env, Dir: cfg.Dir, Steps: protocol.Steps, Timeout: protocol.Timeout, LogDir: logDir,
			PythonPath: pythonPath, Framework: fw, MemoryLimit: limit, DeviceTotal: total,
		})
		protocol.Fresh = func(ctx context.Context, size int) (search.Observation, error) {
			cfg.Notice(fmt.Sprintf("doctor: batch %d in a fresh process", size))
			obs, err := fresh.Probe(ctx, search.Request{Sizes: []int{size}})
			if err != nil {
				return search.Observation{}, err
			}
			return obs[0], nil
		}
	}
	r, err := Run(ctx, protocol, w)
	if err != nil && ctx.Err() != nil {
		return nil, ErrInterrupted
	}
	if keep {
		cfg.Notice("doctor: the worker's output is in " + logDir)
	}
	return r, err
}

// startWorker starts the worker and says so.
func startWorker(ctx context.Context, cfg CommandConfig, env []string, logDir string) (*worker.Worker, error) {
	cfg.Notice("doctor: starting the worker: " + strings.Join(cfg.Command, " "))
	stderrLog := filepath.Join(logDir, "worker.err")
	w, err := worker.Start(ctx, cfg.Command, env, worker.Options{
		Dir:          cfg.Dir,
		StdoutPath:   filepath.Join(logDir, "worker.out"),
		StderrPath:   stderrLog,
		StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ErrInterrupted
		}
		return nil, hint.With(err, runner.WorkerStartHint(err, "full log: "+stderrLog))
	}
	h := w.Hello()
	cfg.Notice(fmt.Sprintf("doctor: worker %d ready on %s after %.1fs (%d warm-up step(s) at batch size %d)",
		h.PID, h.Device, h.SetupSeconds, h.WarmupSteps, h.WarmupSize))
	return w, nil
}
