package runner

import (
	"context"
	"fmt"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/store"
)

// fromHistory returns the answer from the history when the same search was
// done before, or seeds the start from a close one.
func (s *session) fromHistory(ctx context.Context) (*record.Run, error) {
	if !s.cfg.Fresh {
		cached, err := s.deps.Store.Cached(ctx, store.Fingerprint(s.run))
		if err != nil {
			return nil, withHint(fmt.Errorf("read the history: %w", err), "pass --no-db to search without the history")
		}
		if cached != nil {
			cached.Cached = true
			s.deps.Notice(fmt.Sprintf("answered from the history (run %s); --fresh searches again", cached.ID))
			return cached, nil
		}
	}
	if s.scfg.Start != 0 {
		return nil, nil
	}
	near, err := s.deps.Store.Nearest(ctx, store.CommandKey(s.run))
	if err != nil || near == nil {
		return nil, nil
	}
	if seed := seedStart(near, s.run, s.scfg); seed > 0 {
		s.scfg.Start = seed
		s.run.Settings.Start = seed
		s.deps.Notice(fmt.Sprintf("starting at %d, from run %s (answer %d on other settings)", seed, near.ID, near.Answer))
	}
	return nil, nil
}

// seedStart scales a close run's answer to this run's capacity, a little
// below, so that the first trial most likely fits and lands near the
// boundary.
func seedStart(near, run *record.Run, cfg search.Config) int {
	seed := float64(near.Answer) * 0.9
	if near.GPU != nil && run.GPU != nil && near.GPU.Capacity > 0 {
		seed *= float64(run.GPU.Capacity) / float64(near.GPU.Capacity)
	}
	step := max(cfg.MultipleOf, 1)
	s := int(seed) / step * step
	if s < cfg.Min || s > cfg.Max {
		return 0
	}
	return s
}
