package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/batchfit/batchfit/internal/hold"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
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
		s.warn(fmt.Sprintf("the answer is proven in capped trials, not on a held card (%s): a real card may take a size or two less", why))
		s.run.Warnings = append(s.run.Warnings, "not proven on a held card: "+why)
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
	// A held card is the whole card: the context lies inside Capacity.
	cfg.AllocatorCap = false
	cfg.Prior = res.Trials
	st, err := search.Settle(ctx, cfg, s.prober, res.Max, res.FirstFailure)
	var short *hold.ShortError
	if errors.As(err, &short) {
		err = fmt.Errorf("%w: another process took memory on the GPU during the search", err)
	}
	return settled(res, st), err
}
