package search

import (
	"context"
	"math/rand/v2"
	"sync"

	"github.com/batchfit/batchfit/internal/classify"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

// workload is a simulated training job on a simulated GPU: a pure function
// from batch size to what a trial would report. Peak allocated memory is
// fixed + perSample·size plus a little noise, rounded up to the allocator's
// blocks; the trial runs out of memory when that exceeds the capacity less
// a context overhead that no memory figure shows (the CUDA context), so the
// model cannot know exactly where the limit is.
type workload struct {
	capacity  uint64 // device memory, given to the search
	ctx       uint64 // context overhead, hidden from the search
	fixed     uint64 // weights, gradients, optimizer state
	perSample uint64
	round     uint64 // allocator block
	noise     uint64 // amplitude of the peak's noise; < perSample/2 keeps it monotonic
	seed      uint64
	// quadratic adds quadratic·size² bytes (attention over a sequence
	// that grows with the batch, say): a shape the affine model misses.
	quadratic uint64
}

func (w workload) allocated(size int) uint64 {
	b := w.fixed + w.perSample*uint64(size) + w.quadratic*uint64(size)*uint64(size)
	if w.noise > 0 {
		// Deterministic per size: the same size always peaks the same.
		r := rand.New(rand.NewPCG(w.seed, uint64(size)))
		b += r.Uint64N(w.noise)
	}
	if w.round > 0 {
		b = (b + w.round - 1) / w.round * w.round
	}
	return b
}

func (w workload) fits(size int) bool { return w.allocated(size)+w.ctx <= w.capacity }

// observe is what a clean trial at size reports.
func (w workload) observe(size int) Observation {
	if !w.fits(size) {
		return Observation{Size: size, Outcome: classify.OOM, Failure: w.failure(size)}
	}
	return Observation{Size: size, Outcome: classify.OK, Memory: w.memory(size)}
}

// memory is what the adapter and NVML would report for a run at size.
func (w workload) memory(size int) Memory {
	a := w.allocated(size)
	reserved := (a + 20*mib - 1) / (20 * mib) * (20 * mib)
	return Memory{Allocated: a, Reserved: reserved, Device: reserved + w.ctx}
}

// failure is what a trial at size that does not fit says when it fails:
// its last allocation, an eighth of what the batch costs, was refused with
// the rest held, and the device had what the context and the allocator's
// holdings left free.
func (w workload) failure(size int) Failure {
	need := w.allocated(size)
	request := max(need-w.fixed, 1) / 8
	held := need - request
	reserved := (held + 20*mib - 1) / (20 * mib) * (20 * mib)
	var free uint64
	if room := w.capacity - w.ctx; room > reserved {
		free = room - reserved
	}
	return Failure{Request: request, Allocated: held, Reserved: reserved, Free: free}
}

// truth is the exact answer on cfg's grid, by scanning; 0 when nothing fits.
func (w workload) truth(cfg Config) int {
	g := cfg.grid()
	best := 0
	for s := g.Min; s <= g.Max && w.fits(s); s += g.Step {
		best = s
	}
	return best
}

// withAnswer returns a workload of the given shape whose boundary is at
// answer+frac samples, before noise and rounding.
func withAnswer(capacity, ctx, fixed uint64, answer int, frac float64) workload {
	avail := float64(capacity - ctx - fixed)
	return workload{
		capacity:  capacity,
		ctx:       ctx,
		fixed:     fixed,
		perSample: uint64(avail / (float64(answer) + frac)),
		round:     2 * mib,
	}
}

// fakeProber runs trials against a workload. script, when set, may replace
// an outcome (to inject flakes, crashes and contradictions); attempt counts
// the trials at that size so far, from 0.
type fakeProber struct {
	w      workload
	script func(size, attempt int) (classify.Outcome, bool)
	err    func(call int) error
	// only, when set, filters the memory figures trials report.
	only func(Memory) Memory

	mu    sync.Mutex
	runs  map[int]int
	calls [][]int
	fresh []bool
}

var _ Prober = (*fakeProber)(nil)

func (f *fakeProber) Probe(ctx context.Context, req Request) ([]Observation, error) {
	sizes := req.Sizes
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs == nil {
		f.runs = map[int]int{}
	}
	f.calls = append(f.calls, append([]int(nil), sizes...))
	f.fresh = append(f.fresh, req.Fresh)
	if f.err != nil {
		if err := f.err(len(f.calls) - 1); err != nil {
			return nil, err
		}
	}
	obs := make([]Observation, len(sizes))
	for i, s := range sizes {
		obs[i] = f.w.observe(s)
		if f.script != nil {
			if o, ok := f.script(s, f.runs[s]); ok {
				obs[i] = Observation{Size: s, Outcome: o}
				if o == classify.OK {
					obs[i].Memory = f.w.memory(s)
				}
			}
		}
		if f.only != nil {
			obs[i].Memory = f.only(obs[i].Memory)
		}
		f.runs[s]++
	}
	return obs, nil
}
