package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/hold"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/store"
	"github.com/batchfit/batchfit/internal/units"
)

// chooseProof decides, before the first trial, how an answer under a
// whole-process --memory-limit is proven. On a held card when it can be
// (batchfit holds all but the limit of each GPU while a proof trial runs:
// probe.Prober.SetHeld), as only such a trial has exactly the named card's
// memory for everything it does; the search's own trials, which may run
// side by side, stay capped. Where the GPU cannot be held (another
// process on it, MIG, no CUDA driver API) the proof runs capped, and the
// run says that a real card may take a size or two less.
func (s *session) chooseProof() {
	if s.limit == 0 {
		return
	}
	s.run.Proof = record.ProofCapped
	if s.cfg.MemoryLimitScope == limit.ScopeAllocator || s.fresh == nil || s.deps.Holder == nil || s.cfg.Group.Devices == nil {
		return
	}
	why := s.othersOnGPU()
	if why == "" {
		if err := s.fresh.CanHold(); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		// Shown and recorded in the same words: the display shows a run's
		// warnings it has not shown yet, once.
		w := fmt.Sprintf("the answer is proven in capped trials, not on a held card (%s): a real card may take a size or two less", why)
		s.warn(w)
		s.run.Warnings = append(s.run.Warnings, w)
		return
	}
	s.run.Proof = record.ProofHeld
	s.scfg.Unproven = true
}

// othersOnGPU says which GPU of the search other processes hold memory on,
// "" when none holds more than BusyThreshold: holding all but the limit of
// a GPU that others use would take their memory's changes out of the
// trial's.
func (s *session) othersOnGPU() string {
	for _, d := range s.cfg.Group.Devices {
		if n := s.held[d.Index]; n > BusyThreshold {
			return fmt.Sprintf("other processes hold %s on gpu %d", units.Bytes(n), d.Index)
		}
	}
	return ""
}

// proveHeld proves the search's answer on a held card: search.Settle runs
// it and the size above in fresh trials, each alone on its GPUs while
// batchfit holds all but the limit of them, with the proof's rules; where
// they disagree with the capped trials it moves the answer. The soak and
// throughput that follow run held too.
func (s *session) proveHeld(ctx context.Context, cfg search.Config, res search.Result) (search.Result, error) {
	s.fresh.SetHeld(true)
	cfg.Unproven, cfg.ProofAlongside, cfg.SideBySide = false, false, 0
	// Held trials run alone on their GPUs: a size a GPU a round.
	cfg.Parallel = max(1, len(s.cfg.Group.Slots))
	// A held card is the whole card: the context lies inside Capacity.
	cfg.AllocatorCap = false
	cfg.Prior = prior(res)
	st, err := search.Settle(ctx, cfg, s.prober, res.Max, res.FirstFailure)
	// A trial started for a next round that did not come.
	s.fresh.DropSpare()
	if err != nil {
		// The capped answer stands in the record, unproven.
		s.run.Proof = record.ProofCapped
		return res, heldProofError(err)
	}
	return settled(res, st), nil
}

// heldProofError is err, which ended a held proof, with a hint where the
// hold failed: the capped trials' answer is in the record, unproven.
func heldProofError(err error) error {
	var short *hold.ShortError
	var held *probe.HoldError
	switch {
	case errors.As(err, &short):
		return hint.With(fmt.Errorf("%w: another process took memory on the GPU during the search", err),
			"search again once the GPU is free; the capped trials' answer is in the record, unproven")
	case errors.As(err, &held):
		return hint.With(err, "search again; the capped trials' answer is in the record, unproven")
	}
	return err
}

// prior is what the capped search tells the held proof (search.Config.Prior):
// its successes, for the memory model's figures, and the failures it
// finally believed: above its answer, at sizes no trial of it ran at (a
// random failure whose re-run fitted, and a failure below the answer that
// a conflict set aside, say nothing of the card).
func prior(res search.Result) []search.Observation {
	ran := map[int]bool{}
	for _, o := range res.Trials {
		if o.Outcome.Fits() {
			ran[o.Size] = true
		}
	}
	var out []search.Observation
	for _, o := range res.Trials {
		if o.Outcome.Fits() || (o.Outcome.TooLarge() && o.Size > res.Max && !ran[o.Size]) {
			out = append(out, o)
		}
	}
	return out
}

// machine is the kind of process the search's trials are, for the memory
// they hold outside their allocator (store.Machine); false when the GPU or
// the framework's version is unknown.
func (s *session) machine() (store.Machine, bool) {
	devices := s.cfg.Group.Devices
	if len(devices) == 0 || s.run.Torch == "" {
		return store.Machine{}, false
	}
	return store.Machine{GPU: devices[0].Name, Driver: devices[0].Driver, Framework: s.cfg.Framework.Name() + ": " + s.run.Torch}, true
}

// noteOutside keeps what this search's trials held outside their
// allocator, for the next search's first trial.
func (s *session) noteOutside(ctx context.Context) {
	m, ok := s.machine()
	if !ok || s.fresh == nil || s.limit == 0 || s.cfg.MemoryLimitScope == limit.ScopeAllocator {
		return
	}
	if n := s.fresh.Outside(); n > 0 {
		if err := s.deps.Store.NoteOutside(context.WithoutCancel(ctx), m, n); err != nil {
			s.deps.Notice("warning: " + err.Error())
		}
	}
}

// pool is XLA's pool on the named card, when the trials kept one: the
// share of the card the user's fraction or jaxlib's default gives it
// (adapter.JAXPool, which sized it).
func (s *session) pool() *record.Pool {
	if s.limit == 0 || s.fresh == nil || s.fresh.Framework() != adapter.FrameworkJAX ||
		!slices.ContainsFunc(s.run.Trials, func(t record.Trial) bool { return t.PoolLimit > 0 }) {
		return nil
	}
	pool, ok := adapter.JAXPool(s.cfg.Env, s.limit)
	if !ok {
		return nil
	}
	share, source := adapter.JAXFractionSource(s.cfg.Env)
	return &record.Pool{Framework: adapter.FrameworkJAX, Bytes: pool, Share: share, Source: source}
}
