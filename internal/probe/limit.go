package probe

import (
	"fmt"
	"github.com/batchfit/batchfit/internal/record"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/units"
)

// allocatorCap is what the framework's allocator may hold: the limit, less
// the most any trial so far held outside the allocator when the limit holds
// for the whole process. The first trial, with nothing measured yet, gets
// the limit less Config.OutsideGuess (the whole limit without one);
// holdToLimit runs it again when that was too much, and one the guess
// failed runs again when the guess was too much (Prober.one).
func (p *Prober) allocatorCap() uint64 {
	limit := p.cfg.MemoryLimit
	if limit == 0 || !p.cfg.WholeProcess {
		return limit
	}
	p.mu.Lock()
	outside := p.outside
	if !p.measured {
		outside = p.cfg.OutsideGuess
	}
	p.mu.Unlock()
	if outside >= limit {
		// The process alone fills the card: leave the allocator a sliver,
		// and the trial fails as it would on such a card.
		return min(limit, 1<<20)
	}
	return limit - outside
}

// Outside is the most memory a trial here held outside its framework's
// allocator, 0 until one measured it: for the history, which gives it to
// the next search as Config.OutsideGuess.
func (p *Prober) Outside() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outside
}

// Framework is the framework the trials reported using ("torch", "jax";
// adapter.Summary.Framework), "" until one did.
func (p *Prober) Framework() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.framework
}

// guessing says the next trial's cap comes from Config.OutsideGuess.
func (p *Prober) guessing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.measured && p.cfg.OutsideGuess > 0 && p.cfg.WholeProcess && p.cfg.MemoryLimit > 0
}

// dropGuess stops Config.OutsideGuess standing in for a measurement: the
// next cap is the limit less what trials here measured, if anything.
func (p *Prober) dropGuess() {
	p.mu.Lock()
	p.measured = true
	p.mu.Unlock()
}

// outsideOf is the memory a trial held outside its framework's allocator:
// its NVML peak less the allocator's reserved peak (torch's reserved, JAX's
// pool), 0 when either is unknown.
func outsideOf(peaks adapter.Peaks, device uint64) uint64 {
	if peaks.Reserved == 0 || device <= peaks.Reserved {
		return 0
	}
	return device - peaks.Reserved
}

// noteDevice keeps what a trial told of the device: the most memory a
// trial held outside its allocator, CUDA's total (cudaTotal), and the
// framework it used.
func (p *Prober) noteDevice(peaks adapter.Peaks, device, cudaTotal uint64, framework string) {
	o := outsideOf(peaks, device)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outside = max(p.outside, o)
	p.measured = p.measured || o > 0
	if p.framework == "" {
		p.framework = framework
	}
	if cudaTotal > 0 && (p.cfg.DeviceTotal == 0 || cudaTotal <= p.cfg.DeviceTotal) {
		p.cudaTotal = cudaTotal
	}
}

// fractionTotal is the total a framework's memory fraction is a share of.
// PyTorch and XLA take CUDA's total, which is less than NVML's
// (DeviceTotal) by the driver's reservation, so a fraction of NVML's total
// caps the allocator a little below the limit (0.4 % on an H200:
// docs/design/whole-process-memory-limit.md). With WholeProcess the cap
// must be exact: CUDA's total once a trial reported it. Without, the
// fraction stays limit / NVML's total, the one PYTORCH_CUDA_ALLOC_CONF
// users compute, so an allocator-scope answer is theirs and stays
// comparable with recorded runs of that scope.
func (p *Prober) fractionTotal() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.WholeProcess && p.cudaTotal > 0 {
		return p.cudaTotal
	}
	return p.cfg.DeviceTotal
}

// capOf is the cap to record for a trial: allocCap when it is less than the
// limit, 0 (none besides the limit) otherwise.
func capOf(allocCap, limit uint64) uint64 {
	if allocCap < limit {
		return allocCap
	}
	return 0
}

// poolLimit is the capacity the search should model a trial's framework
// against: the pool limit it reported (JAX, TensorFlow), else the
// allocator's cap when that is below the limit, so that the model leaves
// room for what lies outside the allocator.
func (p *Prober) poolLimit(peaks adapter.Peaks, allocCap uint64, sum adapter.Summary) uint64 {
	if peaks.Limit > 0 {
		return peaks.Limit
	}
	if allocCap < p.cfg.MemoryLimit && p.cfg.Framework.EnforcesLimit(sum) {
		return allocCap
	}
	return 0
}

// holdToLimit fails a trial that ran past --memory-limit. A framework with
// an allocator cap enforces the limit on its allocator itself; other
// programs, and with WholeProcess every program, are held to it by their
// NVML peak. A framework's own peak above the limit means the program got
// round the cap (a JAX program that sets its own memory fraction, say).
// recap says the trial failed only because its allocator was allowed more
// than the card leaves it once this trial's memory outside the allocator is
// counted: it should run again with the cap allocatorCap now gives.
func (p *Prober) holdToLimit(c classify.Result, peaks adapter.Peaks, sum adapter.Summary, device, allocCap uint64) (_ classify.Result, recap bool) {
	limit := p.cfg.MemoryLimit
	if c.Outcome != classify.OK || limit == 0 {
		return c, false
	}
	switch {
	case peaks.Allocated > limit:
		return classify.Result{Outcome: classify.OOM, Reason: fmt.Sprintf("exceeded --memory-limit (framework peak %s > %s)", units.Bytes(peaks.Allocated), units.Bytes(limit))}, false
	case p.cfg.WholeProcess && device > limit:
		outside := outsideOf(peaks, device)
		reason := fmt.Sprintf("exceeded --memory-limit (peak %s > %s)", units.Bytes(device), units.Bytes(limit))
		if outside > 0 {
			reason = fmt.Sprintf("exceeded --memory-limit for the whole process (peak %s > %s, %s of it outside the allocator)",
				units.Bytes(device), units.Bytes(limit), units.Bytes(outside))
		}
		recap = outside > 0 && outside < limit && allocCap > limit-outside && p.cfg.Framework.EnforcesLimit(sum)
		return classify.Result{Outcome: classify.OOM, Reason: reason}, recap
	case !p.cfg.Framework.EnforcesLimit(sum) && device > limit:
		return classify.Result{Outcome: classify.OOM, Reason: fmt.Sprintf("exceeded --memory-limit (peak %s > %s)", units.Bytes(device), units.Bytes(limit))}, false
	}
	return c, false
}

// limitEnv sets the frameworks' limit variables for a trial whose
// allocator may have allocCap. Under --framework auto, once the trials have
// reported their framework, only that one gets the cap (which a
// whole-process limit fixes after the first trial, as a share of CUDA's
// total); the others keep the limit as the first trial had it, so that
// their variables, which the program does not read, do not make its
// environment another one for the fork server. allocCap 0 is no cap: the
// whole card, or a held card, which holds the process to the limit
// itself; JAX's pool is still sized as that card would size it (poolEnv).
func (p *Prober) limitEnv(env []string, allocCap uint64) []string {
	if allocCap == 0 {
		return p.poolEnv(env, 0)
	}
	total := p.fractionTotal()
	p.mu.Lock()
	framework := p.framework
	p.mu.Unlock()
	if py, auto := p.cfg.Framework.(adapter.Python); auto && framework != "" {
		base := min(p.cfg.MemoryLimit, p.cfg.DeviceTotal)
		env = py.LimitEnvReported(env, framework, min(allocCap, total), total, base, p.cfg.DeviceTotal)
	} else {
		env = p.cfg.Framework.LimitEnv(env, min(allocCap, total), total)
	}
	return p.poolEnv(env, allocCap)
}

// poolEnv sizes XLA's pool as a JAX program would have it on the named
// card: the fraction the user set, or jaxlib's default, of the card's
// memory rather than of this GPU's (adapter.JAXPool), and no more than
// allocCap when that is set. Without a limit, for a program that
// allocates on demand (XLA_PYTHON_CLIENT_ALLOCATOR=platform) and for a
// framework other than JAX, env is as it was.
func (p *Prober) poolEnv(env []string, allocCap uint64) []string {
	name := p.cfg.Framework.Name()
	if p.cfg.MemoryLimit == 0 || (name != adapter.FrameworkJAX && name != adapter.FrameworkAuto) {
		return env
	}
	pool := p.namedPool(allocCap)
	if pool == 0 {
		return env
	}
	p.mu.Lock()
	framework := p.framework
	p.mu.Unlock()
	total := p.fractionTotal()
	switch {
	case framework == "" || framework == adapter.FrameworkJAX:
	case allocCap == 0:
		return env // a held trial of another framework: the user's environment
	default:
		// Another framework's program: the variable stays as the first
		// trial had it (see limitEnv).
		total = p.cfg.DeviceTotal
	}
	var grow uint64
	if p.poolGrows() {
		// As on the card: the pool starts where the card's would and grows
		// into what the card leaves the allocator (a held card: all of it).
		grow = allocCap
		if grow == 0 {
			grow = p.cfg.MemoryLimit
		}
	}
	return adapter.JAXLimitEnv(env, pool, min(grow, total), total)
}

// namedPool is XLA's pool on the named card (adapter.JAXPool), no more
// than allocCap when that is set; 0 without a limit or a pool.
func (p *Prober) namedPool(allocCap uint64) uint64 {
	if p.cfg.MemoryLimit == 0 {
		return 0
	}
	pool, ok := adapter.JAXPool(p.cfg.Env, p.cfg.MemoryLimit)
	if !ok {
		return 0
	}
	if allocCap > 0 {
		pool = min(pool, allocCap)
	}
	return pool
}

// poolGrows says this jaxlib grows a bare fraction's pool (poolGrew), so
// trials are given START-CAP fractions: the card's pool, growing into the
// card, as a real card of that size would let it.
func (p *Prober) poolGrows() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grows
}

// poolGrew says a capped trial that ran under env, which gave XLA a bare
// fraction, ended with a pool (its limit, or its peak) past it: its jaxlib
// grows a bare fraction's pool into the whole device, so the trial had more
// memory than the card would give it. Trials from then on get START-CAP
// (poolGrows) and it runs again. The jaxlib batchfit was measured with
// (0.11.2) holds a bare fraction as a fixed pool; newer ones preallocate it
// and grow. A held trial grows into the held card, as on the card itself.
func (p *Prober) poolGrew(env []string, t record.Trial) bool {
	if t.Held || t.PoolLimit == 0 || p.Framework() != adapter.FrameworkJAX || adapter.JAXHoldsBareFraction(p.cfg.FrameworkVersion) {
		// A jaxlib known to hold a bare fraction refuses START-CAP too: a
		// pool past its fraction is the program's own setting.
		return false
	}
	bare := adapter.JAXBarePool(env, p.fractionTotal())
	if bare == 0 {
		return false
	}
	// The fraction written rounds to bytes, and jaxlib's pool to its own
	// granularity: grown is past that by more than 1 %.
	slack := bare / 100
	return t.PoolLimit > bare+slack || t.Allocated > bare+slack
}

// growPools makes poolEnv write START-CAP fractions from now on.
func (p *Prober) growPools() {
	p.mu.Lock()
	p.grows = true
	p.mu.Unlock()
}
