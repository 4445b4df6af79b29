// Package doctor finds out why memory does not come back between trials:
// it runs a warm worker through a fixed protocol (one size several times,
// sizes doubling until one runs out of memory, the first size again, and
// the first size in a fresh process) and turns what the worker measured
// into findings, each with its numbers, its likely cause and a fix.
// RunCommand is the whole of batchfit doctor: the worker started from its
// command, the protocol, and the fresh process beside it.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/worker"
)

// Worker is the warm worker the protocol runs on; *worker.Worker is one.
type Worker interface {
	Hello() worker.Hello
	Trial(ctx context.Context, size, steps int, timeout time.Duration) (worker.Result, error)
	Close() error
}

var _ Worker = (*worker.Worker)(nil)

// Defaults for the zero values of Config.
const (
	DefaultRepeat  = 3
	DefaultSteps   = 3
	DefaultMaxSize = 1 << 16
)

// Config says how to run the protocol.
type Config struct {
	Size    int // the size that is repeated; at least 1
	Repeat  int // how often; 0 means DefaultRepeat
	Steps   int // training steps per trial; 0 means DefaultSteps
	MaxSize int // the hunt for an out-of-memory size stops above this; 0 means DefaultMaxSize
	Timeout time.Duration
	// Fresh runs one trial at size in a fresh process, for the comparison
	// of peaks; nil skips it. It runs after the worker has been closed, so
	// that the two never share the GPU.
	Fresh func(ctx context.Context, size int) (search.Observation, error)
	// OnTrial, when set, is told about each finished trial.
	OnTrial func(Trial)
}

// Phase is the part of the protocol a trial belongs to.
type Phase string

// The phases, in order.
const (
	PhaseRepeat   Phase = "repeat"    // Size, Repeat times
	PhaseGrow     Phase = "grow"      // doubling until out of memory
	PhaseAfterOOM Phase = "after_oom" // Size again, after the OOM
)

// Trial is one trial of the protocol.
type Trial struct {
	Phase Phase `json:"phase"`
	worker.Result
}

// Report is what the protocol measured and found.
type Report struct {
	Worker  worker.Hello `json:"worker"`
	Size    int          `json:"size"`
	Repeat  int          `json:"repeat"`
	Steps   int          `json:"steps"`
	MaxSize int          `json:"max_size"`
	// OOMSize is the size that ran out of memory (or was otherwise too
	// large); 0 when none did up to MaxSize.
	OOMSize int     `json:"oom_size,omitempty"`
	Trials  []Trial `json:"trials"`
	// Fresh is the fresh process's trial at Size; nil when not run.
	Fresh      *search.Observation `json:"fresh,omitempty"`
	FreshError string              `json:"fresh_error,omitempty"`
	// Stopped says why the protocol ended early; "" when it ran through.
	Stopped  string    `json:"stopped,omitempty"`
	Findings []Finding `json:"findings"`
}

// Run runs the protocol on w, closes w, runs the fresh comparison, and
// analyses the whole. The report is returned even with an error (the
// context ended); a worker that crashes or hangs ends the protocol early
// and says so in Stopped, which is not an error.
func Run(ctx context.Context, cfg Config, w Worker) (*Report, error) {
	if cfg.Size < 1 {
		w.Close()
		return nil, fmt.Errorf("doctor: size %d: must be at least 1", cfg.Size)
	}
	if cfg.Repeat <= 0 {
		cfg.Repeat = DefaultRepeat
	}
	if cfg.Steps <= 0 {
		cfg.Steps = DefaultSteps
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	r := &Report{Worker: w.Hello(), Size: cfg.Size, Repeat: cfg.Repeat, Steps: cfg.Steps, MaxSize: cfg.MaxSize}
	err := protocol(ctx, cfg, w, r)
	w.Close()
	if err == nil && cfg.Fresh != nil && r.Stopped == "" {
		obs, ferr := cfg.Fresh(ctx, cfg.Size)
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case ferr != nil:
			r.FreshError = ferr.Error()
		default:
			r.Fresh = &obs
		}
	}
	r.Findings = Analyze(r)
	return r, err
}

// protocol runs the worker's trials. It returns an error only when ctx
// ended.
func protocol(ctx context.Context, cfg Config, w Worker, r *Report) error {
	run := func(phase Phase, size int) (worker.Result, bool, error) {
		res, err := w.Trial(ctx, size, cfg.Steps, cfg.Timeout)
		if errors.Is(err, worker.ErrClosed) {
			r.Stopped = "the worker was gone before the trial at batch size " + fmt.Sprint(size)
			return res, false, nil
		}
		if err != nil {
			return res, false, err
		}
		t := Trial{Phase: phase, Result: res}
		r.Trials = append(r.Trials, t)
		if cfg.OnTrial != nil {
			cfg.OnTrial(t)
		}
		switch {
		case res.Outcome == classify.Canceled:
			return res, false, ctx.Err()
		case res.Outcome == classify.Crash || res.Outcome == classify.Timeout:
			r.Stopped = fmt.Sprintf("the trial at batch size %d ended in %s: %s", size, res.Outcome, res.Reason)
			return res, false, nil
		case res.WorkerGone:
			r.Stopped = fmt.Sprintf("the worker died at batch size %d: %s", size, res.Reason)
			return res, false, nil
		}
		return res, true, nil
	}

	for range cfg.Repeat {
		res, ok, err := run(PhaseRepeat, cfg.Size)
		if !ok {
			return err
		}
		if res.Outcome.TooLarge() {
			r.Stopped = fmt.Sprintf("batch size %d does not fit (%s); give a smaller --size", cfg.Size, res.Outcome)
			return nil
		}
	}
	for size := cfg.Size * 2; size <= cfg.MaxSize; size *= 2 {
		res, ok, err := run(PhaseGrow, size)
		if !ok {
			return err
		}
		if res.Outcome.TooLarge() {
			r.OOMSize = size
			break
		}
	}
	if r.OOMSize == 0 {
		return nil
	}
	_, _, err := run(PhaseAfterOOM, cfg.Size)
	return err
}
