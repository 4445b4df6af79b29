package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/inputs"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/store"
	"github.com/batchfit/batchfit/internal/units"
)

// fromHistory returns the answer from the history when the same search was
// done before and what ran then still stands, or seeds the start from a
// close one (the stale candidate included).
func (s *session) fromHistory(ctx context.Context) (*record.Run, error) {
	if !s.cfg.Fresh && s.cfg.CacheMaxAge > 0 && s.cfg.Soak == 0 { // an answer from the history was not soaked now
		cached, err := s.deps.Store.Cached(ctx, store.Fingerprint(s.run))
		if err != nil {
			return nil, hint.With(fmt.Errorf("read the history: %w", err), "pass --no-db to search without the history")
		}
		if cached != nil {
			if why := s.stale(cached); why != "" {
				s.deps.Notice(fmt.Sprintf("run %s of the history does not answer this search (%s); searching again", cached.ID, why))
			} else {
				cached.Cached, cached.CachedFrom = true, cached.ID
				s.deps.Alert(fmt.Sprintf("answered from the history (run %s, %s old); --fresh searches again",
					cached.ID, age(s.deps.Now().Sub(cached.Started))))
				return cached, nil
			}
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
		why := " on other settings"
		switch {
		case len(near.Flaky) > 0:
			why = ", not reused: its boundary was flaky"
		case near.AtRisk != nil:
			why = ", not reused: its failures put it at risk"
		}
		s.deps.Notice(fmt.Sprintf("starting at %d, from run %s (answer %d%s)", seed, near.ID, near.Answer, why))
	}
	return nil, nil
}

// stale says why a run with this search's fingerprint does not answer it
// now, or "" when it does: it is too old, it has no answer for the margin
// asked, its trials prove nothing under this search's timeout, or a source
// file the program loaded then changed or vanished since (hashed again
// now).
func (s *session) stale(c *record.Run) string {
	if a := s.deps.Now().Sub(c.Started); a > s.cfg.CacheMaxAge {
		return fmt.Sprintf("it is %s old, over --history-max-age %s", age(a), age(s.cfg.CacheMaxAge))
	}
	if m := s.scfg.MarginPercent; m > 0 && m != c.Settings.Margin {
		return fmt.Sprintf("it has no answer for --margin %g", m)
	}
	if why := timeoutStale(c, s.cfg.Timeout); why != "" {
		return why
	}
	return inputs.Changed(c.Inputs)
}

// timeoutStale says why c's trials do not prove its answer under a search
// whose trials may run for timeout (0: no limit), or "" when they do. The
// timeout is not in the fingerprint, because it changes the answer only
// through trials that came near it; those are checked here:
//
//   - A trial that timed out under T shows that its size does not finish
//     within T, and so within any timeout not longer than T. Under a longer
//     one it might finish and fit: the run answers only a search whose
//     timeout is not longer than its own.
//   - A trial that ran in d seconds shows that its size finishes within any
//     timeout longer than d. Under a shorter one it would time out: the run
//     answers only a search whose timeout is longer than each of its
//     successes took.
//
// Soaks and throughput measurements ran under limits of their own and
// decide no size, so they do not count.
func timeoutStale(c *record.Run, timeout time.Duration) string {
	ran := time.Duration(c.Settings.TimeoutSecs * float64(time.Second))
	for _, t := range c.Trials {
		if t.Phase == record.PhaseSoak || t.Phase == record.PhaseThroughput {
			continue
		}
		switch {
		case t.Outcome == classify.Timeout && longer(timeout, ran):
			return fmt.Sprintf("a trial at %d timed out under --timeout %s, shorter than %s", t.Size, ran, timeoutText(timeout))
		case t.Outcome.Fits() && timeout > 0 && t.Seconds >= timeout.Seconds():
			return fmt.Sprintf("a trial at %d ran for %s, over --timeout %s", t.Size, units.Duration(t.Seconds), timeout)
		}
	}
	return ""
}

// longer reports whether timeout a allows more time than b; 0 is no limit.
func longer(a, b time.Duration) bool {
	switch {
	case a == 0:
		return b != 0
	case b == 0:
		return false
	}
	return a > b
}

// timeoutText is a timeout for a notice: 0 is none.
func timeoutText(d time.Duration) string {
	if d == 0 {
		return "no timeout"
	}
	return d.String()
}

// age is a time span for a notice: days from one day on.
func age(d time.Duration) string {
	switch days := int(d.Hours() / 24); {
	case days == 1:
		return "1 day"
	case days > 1:
		return fmt.Sprintf("%d days", days)
	}
	return units.RoughDuration(d.Seconds())
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
