package runner

import (
	"context"
	"fmt"
	"strings"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/units"
)

// maxSoaks bounds the soaks of one run: each costs --soak of time, and a
// workload that keeps failing them needs longer trials (--steps), not a
// walk down one size a soak.
const maxSoaks = 3

// soakAnswer runs the answer for --soak in a fresh process, also after a
// warm worker's search (whose answer search.Settle has confirmed in fresh
// processes already). A soak that does not fit is a failure at the answer:
// the search goes on below it, from the largest size seen to fit there, and
// its new answer is soaked in turn, up to maxSoaks soaks in all. Why the
// answer moved is kept in s.moved for the record.
func (s *session) soakAnswer(ctx context.Context, cfg search.Config, res search.Result) (search.Result, error) {
	for res.Found {
		t, err := s.prober.Soak(ctx, res.Max, s.cfg.Soak)
		if err != nil {
			return res, err
		}
		soak := soakOf(t, s.cfg.Soak.Seconds())
		s.soaks = append(s.soaks, soak)
		obs := search.Observation{Size: t.Size, Outcome: t.Outcome}
		switch {
		case t.Outcome == classify.Canceled || ctx.Err() != nil:
			return res, fmt.Errorf("soak stopped: %w", context.Canceled)
		case t.Outcome.Fits():
			return res, nil
		case t.Outcome == classify.Crash:
			res.Found = false
			return res, &search.CrashError{Observation: obs}
		}
		below, err := s.searchBelow(ctx, cfg, res, obs)
		if err != nil {
			return below, err
		}
		msg := fmt.Sprintf("%s; the answer is now %d", soak.SoakText(), below.Max)
		if len(s.soaks) >= maxSoaks {
			msg += fmt.Sprintf(", not soaked (%d soaks ran out of memory): run more steps per trial (--steps) to search with longer trials", len(s.soaks))
			s.moved = append(s.moved, msg)
			s.prog.Warn(msg)
			return below, nil
		}
		s.moved = append(s.moved, msg)
		s.prog.Warn(msg)
		res = below
	}
	return res, nil
}

// searchBelow goes on with the search below a soak that failed at
// res.Max: the failure is the new bracket's top, the largest size seen to
// fit below it its start. It returns both searches' evidence.
func (s *session) searchBelow(ctx context.Context, cfg search.Config, res search.Result, failed search.Observation) (search.Result, error) {
	step := max(cfg.MultipleOf, 1)
	below := cfg
	below.Max = res.Max - step
	below.MarginPercent = 0 // the margin answer, if any, stays the first search's
	below.Start = 0
	for _, o := range res.Trials {
		if o.Outcome.Fits() && o.Size <= below.Max && o.Size >= below.Min {
			below.Start = max(below.Start, o.Size)
		}
	}
	if below.Max < below.Min || below.Validate() != nil {
		res.Found = false
		return res, &search.NothingFitsError{Observation: failed}
	}
	next, err := s.searchOnce(ctx, below)
	next.Trials = append(append(res.Trials, failed), next.Trials...)
	next.Rounds += res.Rounds + 1
	next.NonMonotonic = append(res.NonMonotonic, next.NonMonotonic...)
	next.Flaky = append(res.Flaky, next.Flaky...)
	if next.Risk == nil {
		next.Risk = res.Risk // still where the first search's failures put it, above
	}
	if next.Model == nil {
		next.Model, next.Figure = res.Model, res.Figure
	}
	if next.Found && next.FirstFailure == 0 {
		// The top of the lowered range: the soak's failure proves it.
		next.FirstFailure = res.Max
	}
	next.Margin = res.Margin
	if next.Margin > next.Max {
		next.Margin = next.Max
	}
	return next, err
}

// soakOf is the record of a soak trial that was to run limit seconds.
func soakOf(t record.Trial, limit float64) record.Soak {
	return record.Soak{
		Size: t.Size, Trial: t.N, Limit: limit, Seconds: t.Seconds,
		Outcome: t.Outcome, Reason: t.Reason, Steps: stepsOf(t),
		StepPeaks: t.StepPeaks, Rising: t.Rising, WorstFirst: t.Batches != nil && t.Batches.WorstFirst,
	}
}

// stepsOf is how many steps a trial reported: the adapter's count, else
// one peak a step, or one time between two steps.
func stepsOf(t record.Trial) int {
	if t.Steps > 0 {
		return t.Steps
	}
	if len(t.StepTimes) > 0 {
		return max(len(t.StepPeaks), len(t.StepTimes)+1)
	}
	return len(t.StepPeaks)
}

// risingWarning says when the answer's memory was still rising at the last
// step of its trials, unless a soak of the answer survived with its memory
// settled: a longer run may not fit.
func (s *session) risingWarning() string {
	run := s.run
	if run.Answer == 0 {
		return ""
	}
	if last, ok := s.answerSoaked(); ok {
		if last.Rising == 0 {
			return ""
		}
		return fmt.Sprintf("memory was still rising at the end of the soak of %d (%s at its last step of %d); it may not fit a longer run: soak longer (--soak)",
			run.Answer, "+"+units.Bytes(last.Rising), last.Steps)
	}
	rising := run.RisingAtAnswer()
	if len(rising) == 0 {
		return ""
	}
	var parts []string
	for _, t := range rising {
		parts = append(parts, fmt.Sprintf("trial %d: +%s at step %d", t.N, units.Bytes(t.Rising), len(t.StepPeaks)))
	}
	return fmt.Sprintf("memory was still rising at the last step of the answer's trials (%d; %s); a longer run may not fit: run more steps (--steps) or soak the answer (--soak 10m)",
		run.Answer, strings.Join(parts, ", "))
}

// unsettledWarning says when the answer's trials ran no step after the
// batches meant to raise their peak (record.Trial.SettleUnseen): their
// peaks cannot say memory stopped rising, however flat, unless a soak of
// the answer survived past them.
func (s *session) unsettledWarning() string {
	run := s.run
	if run.Answer == 0 {
		return ""
	}
	if last, ok := s.answerSoaked(); ok && !s.soakUnsettled(last) {
		return ""
	}
	unseen := run.UnsettledAtAnswer()
	if len(unseen) == 0 {
		return ""
	}
	var parts []string
	need := 0
	for _, t := range unseen {
		from := record.SettleFrom(t.Batches)
		need = max(need, from+1, 3)
		if t.Batches.WorstFirst {
			parts = append(parts, fmt.Sprintf("trial %d ran only its %s", t.N, largestBatches(from)))
		} else {
			parts = append(parts, fmt.Sprintf("trial %d ended at step %d, where its largest shape last grew", t.N, from))
		}
	}
	return fmt.Sprintf("memory after the largest batches was not seen at the answer (%d; %s); a longer run may not fit: run at least %d steps (--steps %d) or soak the answer (--soak 10m)",
		run.Answer, strings.Join(parts, ", "), need, need)
}

// answerSoaked returns the last soak when it ran the answer and survived.
func (s *session) answerSoaked() (record.Soak, bool) {
	if n := len(s.soaks); n > 0 {
		last := s.soaks[n-1]
		return last, last.Size == s.run.Answer && last.Outcome.Fits()
	}
	return record.Soak{}, false
}

// soakUnsettled says the soak's trial, too, ran no step after its largest
// batches.
func (s *session) soakUnsettled(soak record.Soak) bool {
	for _, t := range s.run.Trials {
		if t.N == soak.Trial {
			return t.SettleUnseen()
		}
	}
	return false
}

// largestBatches is "largest batch" or "3 largest batches".
func largestBatches(n int) string {
	if n == 1 {
		return "largest batch"
	}
	return fmt.Sprintf("%d largest batches", n)
}
