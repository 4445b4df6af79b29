package probe

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/trial"
	"github.com/batchfit/batchfit/internal/units"
)

// A held card is one trial's alone, so a held round's trials run one after
// the other, each a fresh process that spends its first seconds on the CPU
// (the interpreter, imports, the data, the model built on the CPU). The
// next trial of the round starts early, while the current one has the GPU,
// and waits at its gate (trial.Gate) where the program first starts torch's
// CUDA or JAX's backends; it goes on once the trial before it has ended and
// the card is held for it. What it does on the GPU, and its time limit,
// start then, as in a trial started at that moment.
//
// A program that reaches the GPU around the gate would take memory from the
// trial beside it. The early trial's own GPU memory is watched from its
// start (NVML's per-process figures, which the search's trials have shown
// to work): when it held any before its turn, it is stopped, the trial it
// ran beside runs again, and no trial starts early from then on.

// early is a trial started early: its plan, its gate, and its run.
type early struct {
	size   int
	plan   planned
	gate   *trial.Gate
	cancel context.CancelFunc
	done   chan struct{} // closed when the run ended: res and err are set
	res    trial.Result
	err    error

	mu    sync.Mutex
	watch *gpu.Watch // its own, from its start; nil without a sampler

	// ran says its gate opened (run); dropped says it was stopped
	// unused: its size runs as any other.
	ran, dropped bool
}

// canStartEarly says whether the next trial of a held round may start
// early: the trials so far ran torch or JAX through the adapter, whose
// gate holds them, in one process (torchrun's ranks, started by subprocess,
// do not inherit the gate, and would meet the trial before them at their
// rendezvous port), and NVML named their processes, so that an early trial
// that takes memory is seen.
func (p *Prober) canStartEarly() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	gated := p.framework == adapter.FrameworkTorch || p.framework == adapter.FrameworkJAX ||
		(p.framework == "" && p.torch != "")
	return !p.noEarly && !p.multiProcess && p.perProcess && gated && p.cfg.Sampler != nil
}

// noteProcesses keeps what a trial's peak and report say of the program's
// processes, for canStartEarly: NVML named them, or several reported.
func (p *Prober) noteProcesses(peak gpu.Peak, sum adapter.Summary) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.perProcess = p.perProcess || peak.Method == gpu.MethodProcess
	p.multiProcess = p.multiProcess || sum.Events > 1 || sum.Ranks > 1
}

// startEarly plans size's trial on gpus and starts it, held at its gate.
func (p *Prober) startEarly(ctx context.Context, size int, gpus []int, sp special) *early {
	e := &early{size: size, plan: p.plan(size, gpus, sp), gate: trial.NewGate(), done: make(chan struct{})}
	spec := e.plan.spec
	spec.Gate = e.gate
	ctx, e.cancel = context.WithCancel(ctx)
	watcher := watchFunc(func(pid int) func() {
		w := p.cfg.Sampler.Start(pid, gpus)
		e.mu.Lock()
		e.watch = w
		e.mu.Unlock()
		return func() {}
	})
	go func() {
		defer close(e.done)
		e.res, e.err = trial.Run(ctx, spec, watcher)
	}()
	return e
}

// tookMemory says how much GPU memory the early trial's processes held
// before its gate opened (as far as NVML listed them); 0 when none, or
// there is no early trial (nil, or dropped).
func (e *early) tookMemory() uint64 {
	if e == nil || e.dropped {
		return 0
	}
	e.mu.Lock()
	w := e.watch
	e.mu.Unlock()
	if w == nil {
		return 0
	}
	if pk := w.Peak(); pk.Method == gpu.MethodProcess {
		return pk.Bytes
	}
	return 0
}

// run opens the gate and waits for the trial's end, with its GPU peak. An
// early trial that ended before its gate opened (it never reached the GPU)
// is simply over.
func (e *early) run() (trial.Result, gpu.Peak, error) {
	e.ran = true
	e.gate.Open()
	<-e.done
	var peak gpu.Peak
	e.mu.Lock()
	if e.watch != nil {
		peak = e.watch.Stop()
	}
	e.mu.Unlock()
	return e.res, peak, e.err
}

// drop stops an early trial that will not run: its number goes back when
// no trial was numbered after it, and its files are removed, as its size
// runs again as any other trial.
func (p *Prober) drop(e *early) {
	if e == nil || e.dropped || e.ran {
		return // a trial that ran is a trial: its record and files stay
	}
	e.dropped = true
	e.cancel()
	<-e.done
	e.mu.Lock()
	if e.watch != nil {
		e.watch.Stop()
	}
	e.mu.Unlock()
	p.mu.Lock()
	if p.n == e.plan.n {
		p.n--
	}
	p.mu.Unlock()
	for _, f := range []string{e.plan.spec.StdoutPath, e.plan.spec.StderrPath, e.plan.base + ".report.jsonl"} {
		os.Remove(f)
	}
}

// takeSpare returns the spare trial when the round opens with its size, in
// the phase it was planned in; otherwise it is dropped.
func (p *Prober) takeSpare(size int) *early {
	p.mu.Lock()
	e, phase := p.spare, p.phase
	p.spare = nil
	p.mu.Unlock()
	if e != nil && (e.size != size || e.plan.phase != phase) {
		p.drop(e)
		return nil
	}
	return e
}

// DropSpare stops the trial started early for a next held round that did
// not come (the answer was proven): its number goes back.
func (p *Prober) DropSpare() {
	p.mu.Lock()
	e := p.spare
	p.spare = nil
	p.mu.Unlock()
	p.drop(e)
}

// disturbed is what the early trial behind trial n, having held took of
// the GPU while n ran, makes of it: it is dropped, no trial starts early
// again, and n runs again (its record marked busy, as attempt did).
func (p *Prober) disturbed(n, size int, behind *early, took uint64) {
	p.drop(behind)
	p.mu.Lock()
	p.noEarly = true
	p.mu.Unlock()
	p.warn(fmt.Sprintf("trial %d at batch size %d: the next trial, started early, held %s of the GPU before its turn (the program reached the GPU before batchfit's gate); running trial %d's size again, and starting no trial early from now on",
		n, size, units.Bytes(took), n))
}
