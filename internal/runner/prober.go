package runner

import (
	"sync"

	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/worker"
)

// trialProber is what a search runs its trials through: fresh processes
// (probe.Prober) or a warm worker (worker.Prober). Both soak the answer
// (--soak) in a fresh process.
type trialProber interface {
	search.Prober
	worker.Soaker
	SetPhase(phase string)
	Trials() []record.Trial
	Close() error
}

var (
	_ trialProber = (*probe.Prober)(nil)
	_ trialProber = (*worker.Prober)(nil)
)

// newProber returns the fresh-process prober, or with a worker a warm
// worker that falls back to fresh processes for re-checks, confirmations
// and the final answer.
func (s *session) newProber(pcfg probe.Config) trialProber {
	if s.cfg.Worker == nil {
		s.fresh = probe.New(pcfg)
		return s.fresh
	}
	// Under a --memory-limit that leaves the card room for three capped
	// processes, the next worker starts while the current one runs, and the
	// fresh confirmations run side by side: each process is held to the
	// limit by its own allocator cap, so none changes another's answer.
	roomy := s.limit > 0 && s.total >= 3*(s.limit+1<<30)
	// The one GPU the search runs on, when it is pinned (--gpus N, or the
	// first of several: LocalGroups); nil when not.
	var pin []int
	if len(s.cfg.Group.Slots) == 1 {
		pin = s.cfg.Group.Slots[0]
	}
	if roomy {
		pcfg.Slots = [][]int{pin, pin}
		s.scfg.SideBySide = 2
		if s.total >= 4*(s.limit+1<<30) {
			// Room for a standby worker and three confirmations: the
			// answer and its first failure twice, the proof in one round.
			pcfg.Slots = [][]int{pin, pin, pin}
			s.scfg.SideBySide = 3
		}
	}
	// The worker's records number fresh trials among the warm ones; those
	// reach the history with the finished run, not under the fresh
	// prober's own numbers.
	onDone := pcfg.OnDone
	pcfg.OnDone = s.prog.TrialDone
	fresh := probe.New(pcfg)
	s.fresh = fresh
	// The answer's fresh confirmations come last: their fork server
	// imports while the worker searches, from the trial file's imports,
	// then from what the worker reports it imported.
	fresh.Prime()
	var taught sync.Once
	return worker.NewProber(worker.ProberConfig{
		Standby:      roomy,
		Command:      s.cfg.Command,
		Env:          worker.Environ(probe.PinEnv(s.cfg.Env, pin), pcfg.PythonPath, s.cfg.Framework, s.limit, s.total),
		Dir:          pcfg.Dir,
		Steps:        pcfg.Steps,
		Timeout:      pcfg.Timeout,
		Warmup:       s.scfg.Min,
		LogDir:       pcfg.LogDir,
		KeepAfterOOM: s.cfg.Worker.KeepAfterOOM,
		Fallback:     fresh,
		OnStart:      func(n, size int) { s.prog.TrialStarted(n, size, nil) },
		OnDone:       onDone,
		OnReady: func(_ int, h worker.Hello) {
			taught.Do(func() { fresh.Teach(h.Packages) })
		},
		Warn: s.prog.Warn,
	})
}
