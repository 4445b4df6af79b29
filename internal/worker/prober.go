package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/trial"
	"github.com/batchfit/batchfit/internal/units"
)

// ProberConfig says how the warm Prober runs trials.
type ProberConfig struct {
	// Command starts a worker: python -m batchfit.worker mymodule:Trial.
	// The same command, run by a fresh-process prober, runs one trial at
	// BATCHFIT_BATCH_SIZE (see python/batchfit/_runtime/worker.py).
	Command []string
	// Env is the workers' whole environment (nil: os.Environ()); it must
	// make the batchfit package importable (adapter.Install's PYTHONPATH)
	// and carries the memory limit (PYTORCH_CUDA_ALLOC_CONF).
	Env          []string
	Dir          string
	Steps        int           // training steps per trial; 0 means 3
	Timeout      time.Duration // per trial; 0 means none
	StartTimeout time.Duration // to a worker's hello; 0 means DefaultStartTimeout
	// Warmup is the batch size of the warm-up (BATCHFIT_WORKER_WARMUP); 0
	// leaves the worker's default, 1. Give the search's smallest size when
	// batch 1 cannot run (BatchNorm on a 1-sample batch).
	Warmup int
	LogDir string // worker-NN.out and .err are kept here; "" means temporary files
	// KeepAfterOOM keeps a worker after an out-of-memory trial when its reset
	// verified. The default replaces it: an OOM may leave the allocator
	// fragmented or a library in a state that verification cannot see.
	KeepAfterOOM bool
	// Standby starts each next worker while the current one runs trials,
	// so a replacement is ready at once. Only safe when every process is
	// capped (--memory-limit) well below what the card has free: the
	// standby holds a CUDA context and the model on the same GPU.
	Standby bool
	// Fallback runs trials in fresh processes: the search's re-checks and
	// confirmations and search.Settle's rounds (search.Request.Fresh), and a re-run
	// of every warm crash. nil starts a new worker for each such trial
	// instead.
	// When it also has Trials() []record.Trial (probe.Prober does), its
	// records join this Prober's.
	Fallback search.Prober
	OOMKills trial.OOMCounter

	OnStart func(n, size int) // a warm trial starts
	// OnDone is told about each warm trial; fresh ones are the fallback's
	// to report (its own OnDone), under its own numbering.
	OnDone  func(t record.Trial)
	Warn    func(msg string)         // a problem that does not stop the search
	OnReady func(n int, hello Hello) // worker n is ready
}

// Record is one trial the Prober ran, warm or fresh.
type Record struct {
	N     int    `json:"n"`
	Size  int    `json:"batch_size"`
	Phase string `json:"phase,omitempty"`
	// Fresh is set for a trial run in a fresh process (through the
	// fallback, or a new worker when there is none).
	Fresh   bool             `json:"fresh,omitempty"`
	Outcome classify.Outcome `json:"outcome"`
	Reason  string           `json:"reason,omitempty"`
	Seconds float64          `json:"seconds"`
	// WorkerN counts the workers the Prober started (1, 2, ...); 0 for
	// trials of the fallback.
	WorkerN   int     `json:"worker,omitempty"`
	WorkerPID int     `json:"worker_pid,omitempty"`
	Result    *Result `json:"result,omitempty"` // the warm worker's full result
	// Recycled is set when the worker was replaced after this trial, and
	// RecycleReason says why.
	Recycled      bool   `json:"recycled,omitempty"`
	RecycleReason string `json:"recycle_reason,omitempty"`
	// Superseded marks a warm crash that was re-run in a fresh process; the
	// next record is the re-run, and its outcome is what the search saw.
	Superseded bool `json:"superseded,omitempty"`

	fresh  *record.Trial
	stdout string
	stderr string
}

// Trial converts the record into the run record's shape. Warm-only figures
// (retained memory, verification, worker, recycling) have no fields there
// yet; they stay in Record.
func (r Record) Trial() record.Trial {
	if r.fresh != nil {
		t := *r.fresh
		t.N = r.N
		if r.Phase != "" {
			t.Phase = r.Phase
		}
		return t
	}
	t := record.Trial{
		N:       r.N,
		Size:    r.Size,
		Outcome: r.Outcome,
		Reason:  r.Reason,
		Seconds: r.Seconds,
		Phase:   r.Phase,
		Retry:   r.Phase == string(search.PhaseRecheck) || r.Phase == string(search.PhaseConfirm),
		Stdout:  r.stdout,
		Stderr:  r.stderr,
	}
	t.WorkerPID, t.Recycled = r.WorkerPID, r.RecycleReason
	if res := r.Result; res != nil {
		t.Allocated, t.Reserved = res.PeakAllocated, res.PeakReserved
		t.Retained = res.RetainedBytes
		verified := res.Verified
		t.Verified = &verified
		t.StepTimes = res.StepSeconds
		if res.Outcome == classify.Crash || res.Outcome == classify.Timeout {
			t.Tail = res.Tail
		}
	}
	return t
}

// WorkerInfo is one worker the Prober started.
type WorkerInfo struct {
	N       int    `json:"n"`
	PID     int    `json:"pid"`
	Hello   Hello  `json:"hello"`
	Trials  int    `json:"trials"`
	Retired string `json:"retired,omitempty"` // why it was replaced; "" while in use
	Stdout  string `json:"stdout_log,omitempty"`
	Stderr  string `json:"stderr_log,omitempty"`
}

// Prober runs the search's trials on a warm worker and replaces the worker
// by policy. It implements search.Prober; it runs one trial at a time.
type Prober struct {
	cfg ProberConfig

	mu      sync.Mutex // guards what readers on other goroutines see
	records []Record
	workers []WorkerInfo
	phase   string
	warned  bool

	w  *Worker // the current worker; only the Probe goroutine touches it
	wi int     // its index in workers

	// next delivers the standby worker (ProberConfig.Standby) once it is
	// ready; stopNext cancels its start. Only the Probe goroutine touches
	// them.
	next     chan standby
	stopNext context.CancelFunc
}

// standby is a worker started ahead of need, or why it could not start.
type standby struct {
	w   *Worker
	n   int
	err error
}

var _ search.Prober = (*Prober)(nil)

// NewProber returns a Prober for cfg. It starts no worker until the first
// trial.
func NewProber(cfg ProberConfig) *Prober {
	if cfg.Steps <= 0 {
		cfg.Steps = 3
	}
	return &Prober{cfg: cfg}
}

// SetPhase labels the trials started from now on, and the fallback's. The
// caller forwards the phase of each search.EventPlan from search.Run and
// search.Settle (Config.OnEvent), so that settling's trials are labelled
// "confirm".
func (p *Prober) SetPhase(phase string) {
	p.mu.Lock()
	p.phase = phase
	p.mu.Unlock()
	if f, ok := p.cfg.Fallback.(interface{ SetPhase(string) }); ok {
		f.SetPhase(phase)
	}
}

// Probe runs the request's sizes one after another. Fresh requests
// (search.Request.Fresh) go to fresh processes; the others to the warm
// worker.
func (p *Prober) Probe(ctx context.Context, req search.Request) ([]search.Observation, error) {
	if req.Fresh {
		return p.fresh(ctx, req)
	}
	obs := make([]search.Observation, 0, len(req.Sizes))
	for _, size := range req.Sizes {
		o, err := p.warm(ctx, size)
		if err != nil {
			return obs, err
		}
		obs = append(obs, o)
	}
	return obs, nil
}

// warm runs one trial on the warm worker, starting one if needed.
func (p *Prober) warm(ctx context.Context, size int) (search.Observation, error) {
	if ctx.Err() != nil {
		return search.Observation{Size: size, Outcome: classify.Canceled}, nil
	}
	var res Result
	for attempt := 0; ; attempt++ {
		w, err := p.ensure(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return search.Observation{Size: size, Outcome: classify.Canceled}, nil
			}
			return search.Observation{}, fmt.Errorf("warm trial at batch size %d: %w", size, err)
		}
		if p.cfg.OnStart != nil {
			p.cfg.OnStart(p.nextN(), size)
		}
		res, err = w.Trial(ctx, size, p.cfg.Steps, p.cfg.Timeout)
		if errors.Is(err, ErrClosed) && attempt == 0 {
			// It died between trials (killed from outside); a new one
			// gets this trial.
			p.retire("it was gone before the trial")
			continue
		}
		if err != nil {
			return search.Observation{}, fmt.Errorf("warm trial at batch size %d: %w", size, err)
		}
		break
	}

	rec := p.recordWarm(res)
	if why := p.recycleReason(res); why != "" {
		p.retire(why)
		rec.Recycled, rec.RecycleReason = true, why
	} else {
		p.mu.Lock()
		p.workers[p.wi].Trials++
		p.mu.Unlock()
	}
	if !res.Verified && !res.WorkerGone && res.Outcome != classify.Canceled {
		p.warnOnce(fmt.Sprintf("worker pid %d kept %s after the trial at batch size %d (its reset did not return to the baseline); a fresh worker takes over. 'batchfit doctor' shows why",
			res.WorkerPID, units.SignedBytes(res.RetainedBytes), size))
	}
	// A crash in a warm worker may be the worker's, not the command's: the
	// fresh process decides, and stops the search if it crashes too.
	rerun := res.Outcome == classify.Crash
	rec.Superseded = rerun
	p.add(rec)
	if !rerun {
		return search.Observation{
			Size:    size,
			Outcome: res.Outcome,
			Memory:  search.Memory{Allocated: res.PeakAllocated, Reserved: res.PeakReserved},
			Failure: failureOf(res, p.deviceTotal()),
		}, nil
	}
	obs, err := p.fresh(ctx, search.Request{Sizes: []int{size}})
	if err != nil {
		return search.Observation{}, err
	}
	return obs[0], nil
}

// recycleReason says why the worker must be replaced after res, or "".
func (p *Prober) recycleReason(res Result) string {
	switch {
	case res.WorkerGone:
		return "the worker is gone: " + res.Reason
	case res.ResetError != "":
		return "its reset failed: " + res.ResetError
	case !res.Verified:
		return fmt.Sprintf("its reset left %s allocated above the baseline", units.SignedBytes(res.RetainedBytes))
	case res.Outcome == classify.OOM && !p.cfg.KeepAfterOOM:
		return "after an out-of-memory error"
	case res.Outcome != classify.OK && res.Outcome != classify.OOM:
		return "after a failed trial (" + string(res.Outcome) + ")"
	}
	return ""
}

// fresh runs the request's sizes in fresh processes: through the fallback,
// or each on a worker of its own.
func (p *Prober) fresh(ctx context.Context, req search.Request) ([]search.Observation, error) {
	sizes := req.Sizes
	// An idle worker still holds its CUDA context, model and optimizer
	// state: on a real card the fresh process would have that much less.
	p.retire("the GPU was needed for a trial in a fresh process")
	if h, ok := p.cfg.Fallback.(interface{ Holding() bool }); ok && h.Holding() {
		// A trial on a held card has the GPU to itself: a standby worker
		// starting beside it would take its card's memory.
		p.dropStandby()
	}
	if p.cfg.Fallback == nil {
		return p.freshWorkers(ctx, sizes)
	}
	lister, _ := p.cfg.Fallback.(interface{ Trials() []record.Trial })
	before := 0
	if lister != nil {
		before = len(lister.Trials())
	}
	if nf, ok := p.cfg.Fallback.(interface{ NumberFrom(int) }); ok {
		// Shown live under the numbers the records give them.
		nf.NumberFrom(p.nextN())
	}
	start := time.Now()
	obs, err := p.cfg.Fallback.Probe(ctx, req)
	var ts []record.Trial
	if lister != nil {
		if all := lister.Trials(); len(all) > before {
			ts = all[before:]
		}
	}
	p.mu.Lock()
	phase := p.phase
	p.mu.Unlock()
	for i, o := range obs {
		rec := Record{Size: o.Size, Phase: phase, Fresh: true, Outcome: o.Outcome, Seconds: time.Since(start).Seconds()}
		if rec.Size == 0 && i < len(sizes) {
			rec.Size = sizes[i]
		}
		if i < len(ts) {
			t := ts[i]
			rec.fresh = &t
			rec.Reason, rec.Seconds = t.Reason, t.Seconds
		}
		p.add(rec)
	}
	if err != nil {
		return obs, fmt.Errorf("fresh trial: %w", err)
	}
	return obs, nil
}

// Soaker runs one long trial in a fresh process: probe.Prober.Soak.
type Soaker interface {
	Soak(ctx context.Context, size int, d time.Duration) (record.Trial, error)
}

// Soak runs size for d in a fresh process through the fallback (--soak),
// with the GPU to itself: the idle worker is stopped first. The trial joins
// this Prober's records under their numbering.
func (p *Prober) Soak(ctx context.Context, size int, d time.Duration) (record.Trial, error) {
	soaker, ok := p.cfg.Fallback.(Soaker)
	if !ok {
		return record.Trial{}, fmt.Errorf("soak at batch size %d: no fresh-process prober to run it", size)
	}
	p.retire("the GPU was needed for a soak in a fresh process")
	t, err := soaker.Soak(ctx, size, d)
	if err != nil {
		return record.Trial{}, err
	}
	p.add(Record{Size: size, Phase: record.PhaseSoak, Fresh: true, Outcome: t.Outcome, Reason: t.Reason, Seconds: t.Seconds, fresh: &t})
	recs := p.Records()
	return recs[len(recs)-1].Trial(), nil
}

// freshWorkers runs each size on a worker started for it alone.
func (p *Prober) freshWorkers(ctx context.Context, sizes []int) ([]search.Observation, error) {
	obs := make([]search.Observation, 0, len(sizes))
	for _, size := range sizes {
		if ctx.Err() != nil {
			obs = append(obs, search.Observation{Size: size, Outcome: classify.Canceled})
			continue
		}
		w, n, err := p.start(ctx)
		if err != nil {
			if ctx.Err() != nil {
				obs = append(obs, search.Observation{Size: size, Outcome: classify.Canceled})
				continue
			}
			return obs, fmt.Errorf("fresh trial at batch size %d: %w", size, err)
		}
		if p.cfg.OnStart != nil {
			p.cfg.OnStart(p.nextN(), size)
		}
		res, err := w.Trial(ctx, size, p.cfg.Steps, p.cfg.Timeout)
		w.Close()
		p.mu.Lock()
		p.workers[n].Trials++
		p.workers[n].Retired = "it ran one fresh trial"
		p.mu.Unlock()
		if err != nil {
			return obs, fmt.Errorf("fresh trial at batch size %d: %w", size, err)
		}
		rec := p.recordWarmOn(res, n)
		rec.Fresh = true
		p.add(rec)
		obs = append(obs, search.Observation{Size: size, Outcome: res.Outcome,
			Memory: search.Memory{Allocated: res.PeakAllocated, Reserved: res.PeakReserved}})
	}
	return obs, nil
}

// Records returns every trial so far, warm and fresh, in order.
func (p *Prober) Records() []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Record(nil), p.records...)
}

// Trials returns Records in the run record's shape.
func (p *Prober) Trials() []record.Trial {
	recs := p.Records()
	out := make([]record.Trial, len(recs))
	for i, r := range recs {
		out[i] = r.Trial()
	}
	return out
}

// Workers returns the workers started so far.
func (p *Prober) Workers() []WorkerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]WorkerInfo(nil), p.workers...)
}

// TorchVersion is the torch version the first worker reported.
func (p *Prober) TorchVersion() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		if w.Hello.Torch != "" {
			return w.Hello.Torch
		}
	}
	return ""
}

// Close stops the current worker.
func (p *Prober) Close() error {
	p.dropStandby()
	if p.w != nil {
		p.w.Close()
		p.w = nil
	}
	return nil
}

// ensure returns the current worker, starting one if there is none.
func (p *Prober) ensure(ctx context.Context) (*Worker, error) {
	if p.w != nil {
		return p.w, nil
	}
	var s standby
	if p.next == nil && p.cfg.Standby {
		// The first worker's standby starts beside it: an OOM early in the
		// search finds it (nearly) ready.
		p.startStandby(ctx)
		s.w, s.n, s.err = p.start(ctx)
		if s.err != nil {
			p.dropStandby()
			return nil, s.err
		}
		p.w, p.wi = s.w, s.n
		return s.w, nil
	}
	if p.next != nil {
		s = <-p.next
		p.next, p.stopNext = nil, nil
		if s.err != nil && ctx.Err() == nil {
			s.w, s.n, s.err = p.start(ctx) // the standby failed: start one in the open, for its error
		}
	} else {
		s.w, s.n, s.err = p.start(ctx)
	}
	if s.err != nil {
		return nil, s.err
	}
	p.w, p.wi = s.w, s.n
	p.startStandby(ctx)
	return s.w, nil
}

// startStandby starts the next worker while the current one runs trials,
// so that replacing a worker (after an OOM, by default) costs no start-up.
// Only with ProberConfig.Standby: the standby holds a CUDA context and a
// model on the GPU, which is safe only when every worker is capped below
// what the card has free.
func (p *Prober) startStandby(ctx context.Context) {
	if !p.cfg.Standby || p.next != nil {
		return
	}
	sctx, cancel := context.WithCancel(ctx)
	ch := make(chan standby, 1)
	p.next, p.stopNext = ch, cancel
	go func() {
		w, n, err := p.start(sctx)
		ch <- standby{w: w, n: n, err: err}
	}()
}

// dropStandby stops the standby worker, waiting until it is gone.
func (p *Prober) dropStandby() {
	if p.next == nil {
		return
	}
	p.stopNext()
	if s := <-p.next; s.w != nil {
		s.w.Close()
		p.mu.Lock()
		p.workers[s.n].Retired = "not needed"
		p.mu.Unlock()
	}
	p.next, p.stopNext = nil, nil
}

// start starts a worker and registers it; n is its index in workers.
func (p *Prober) start(ctx context.Context) (*Worker, int, error) {
	// Reserve the index first: a standby may be starting at the same time.
	p.mu.Lock()
	n := len(p.workers)
	p.workers = append(p.workers, WorkerInfo{N: n + 1, Retired: "did not start"})
	p.mu.Unlock()
	opts := Options{Dir: p.cfg.Dir, StartTimeout: p.cfg.StartTimeout, OOMKills: p.cfg.OOMKills}
	if p.cfg.LogDir != "" {
		base := filepath.Join(p.cfg.LogDir, fmt.Sprintf("worker-%02d", n+1))
		opts.StdoutPath, opts.StderrPath = base+".out", base+".err"
	}
	env := p.cfg.Env
	if env == nil {
		env = os.Environ()
	}
	if p.cfg.Warmup > 0 {
		env = append(adapter.Without(env, WarmupEnv), WarmupEnv+"="+strconv.Itoa(p.cfg.Warmup))
	}
	w, err := Start(ctx, p.cfg.Command, env, opts)
	if err != nil {
		return nil, 0, err
	}
	stdout, stderr := w.Logs()
	info := WorkerInfo{N: n + 1, PID: w.PID(), Hello: w.Hello()}
	if p.cfg.LogDir != "" {
		info.Stdout, info.Stderr = stdout, stderr
	}
	p.mu.Lock()
	p.workers[n] = info
	p.mu.Unlock()
	if p.cfg.OnReady != nil {
		p.cfg.OnReady(n+1, info.Hello)
	}
	return w, n, nil
}

// retire closes the current worker, noting why.
func (p *Prober) retire(why string) {
	if p.w == nil {
		return
	}
	p.w.Close()
	p.w = nil
	p.mu.Lock()
	p.workers[p.wi].Retired = why
	p.mu.Unlock()
}

func (p *Prober) recordWarm(res Result) Record { return p.recordWarmOn(res, p.wi) }

func (p *Prober) recordWarmOn(res Result, wi int) Record {
	p.mu.Lock()
	info := p.workers[wi]
	phase := p.phase
	p.mu.Unlock()
	r := res
	return Record{
		Size:      res.Size,
		Phase:     phase,
		Outcome:   res.Outcome,
		Reason:    res.Reason,
		Seconds:   res.Seconds,
		WorkerN:   info.N,
		WorkerPID: res.WorkerPID,
		Result:    &r,
		stdout:    info.Stdout,
		stderr:    info.Stderr,
	}
}

// nextN is the number the next record will get.
func (p *Prober) nextN() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.records) + 1
}

func (p *Prober) add(rec Record) {
	p.mu.Lock()
	rec.N = len(p.records) + 1
	p.records = append(p.records, rec)
	p.mu.Unlock()
	if p.cfg.OnDone != nil && !rec.Fresh {
		p.cfg.OnDone(rec.Trial())
	}
}

func (p *Prober) warnOnce(msg string) {
	p.mu.Lock()
	first := !p.warned
	p.warned = true
	p.mu.Unlock()
	if first && p.cfg.Warn != nil {
		p.cfg.Warn(msg + " (later ones are in the trial records)")
	}
}

// failureOf is what an out-of-memory warm trial said of itself, read as a
// fresh trial's is (probe.FailureOf): the allocation torch's OOM observer
// saw refused, with the allocator's counters then, and what a cap below the
// device left free, else the device's free memory. The planner places its
// next probe by how far the trial was from fitting.
func failureOf(r Result, total uint64) search.Failure {
	if r.Outcome != classify.OOM || r.OOMRequest == nil || r.OOMRequest.Bytes == 0 {
		return search.Failure{}
	}
	sum := adapter.Summary{Exception: r.Exception, DeviceTotal: total, OOMRequests: []adapter.OOMRequest{*r.OOMRequest}}
	return probe.FailureOf(classify.OOM, sum, nil)
}

// deviceTotal is the GPU's memory as the latest worker reported it, or 0.
func (p *Prober) deviceTotal() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.workers) - 1; i >= 0; i-- {
		if t := p.workers[i].Hello.DeviceTotal; t > 0 {
			return t
		}
	}
	return 0
}
