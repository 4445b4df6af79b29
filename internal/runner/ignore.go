package runner

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/batchfit/batchfit/internal/caveat"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/search"
)

// hasPlaceholder reports whether the size reaches argv.
func hasPlaceholder(argv []string) bool {
	return slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, probe.Placeholder) })
}

// sizeCheck ends a search as soon as its trials show that the command
// ignores the batch size, with a *caveat.IgnoresBatchSizeError.
type sizeCheck struct {
	trialProber
	capacity    uint64 // the card or --memory-limit; 0 when unknown
	placeholder bool   // the command has {}
	worker      bool   // a warm worker runs the trials
	// warn, set for a command without {}, says once, after the first
	// trials, that only the environment carries the size, unless their
	// program took it from batchfit.batch_size(): only a trial can tell.
	warn   func(string)
	warned sync.Once
}

var _ trialProber = (*sizeCheck)(nil)

func (c *sizeCheck) Probe(ctx context.Context, req search.Request) ([]search.Observation, error) {
	obs, err := c.trialProber.Probe(ctx, req)
	if c.warn != nil && len(c.Trials()) > 0 {
		c.warned.Do(func() {
			if !caveat.SizeRead(c.Trials()) {
				c.warn("the command has no {}; only BATCHFIT_BATCH_SIZE carries the batch size")
			}
		})
	}
	if err != nil {
		return obs, err
	}
	for _, o := range obs {
		if !o.Outcome.Fits() && !o.Outcome.TooLarge() {
			// A crash or a cancellation says more; the search reports it.
			return obs, nil
		}
	}
	if e := caveat.Ignored(c.Trials(), c.capacity, c.placeholder, c.worker); e != nil {
		return obs, e
	}
	return obs, nil
}

// unusedSizeWarning is caveat.UnusedSize for a search that found its
// answer at --max: simulated and warm-worker searches are left out.
func (s *session) unusedSizeWarning(res search.Result) string {
	if s.cfg.Simulated || s.cfg.Worker != nil || !res.Found || res.FirstFailure != 0 {
		return ""
	}
	return caveat.UnusedSize(s.run.Trials, s.capacity(), res.Max, hasPlaceholder(s.cfg.Command))
}

// capacity is the memory a trial may use: the card or --memory-limit; 0
// when unknown.
func (s *session) capacity() uint64 {
	if s.run.GPU == nil {
		return 0
	}
	return s.run.GPU.Capacity
}
