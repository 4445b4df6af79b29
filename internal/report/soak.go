package report

import (
	"fmt"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
)

// soakEnd says how a soak ended, in fixed words and numbers only (the
// charts draw it): "ran 6000 steps", "out of memory after 3120 steps".
func soakEnd(s record.Soak) string {
	if s.Outcome.Fits() {
		return fmt.Sprintf("ran %d steps", s.Steps)
	}
	return fmt.Sprintf("%s after %d steps", soakOutcomeWords(s.Outcome), s.Steps)
}

// soakOutcomeWords names how a soak failed, for a reader. An outcome the
// record should not hold is "failed": the record's own text stays out of
// the charts.
func soakOutcomeWords(o classify.Outcome) string {
	switch o {
	case classify.OOM:
		return "out of memory"
	case classify.HostOOM:
		return "out of host memory"
	case classify.SizeLimit:
		return "too large (size limit)"
	case classify.Timeout:
		return "timed out"
	case classify.Crash:
		return "crashed"
	case classify.Canceled:
		return "canceled"
	}
	return "failed"
}

// soakEffect says what soak i did to the answer: "kept the answer",
// "moved the answer down to 967", or "" when it says nothing about it (a
// crash or an interruption ended the search).
func soakEffect(run *record.Run, i int) string {
	s := run.Soaks[i]
	switch {
	case s.Outcome.Fits() && s.Size == run.Answer:
		return "kept the answer"
	case s.Outcome.Fits():
		return ""
	case !s.Outcome.TooLarge():
		return ""
	}
	// The next soak ran at the answer this one moved down to; after the
	// last, the run's answer is it.
	to := run.Answer
	if i+1 < len(run.Soaks) {
		to = run.Soaks[i+1].Size
	}
	if to <= 0 || to >= s.Size {
		return "nothing below it fits"
	}
	return fmt.Sprintf("moved the answer down to %d", to)
}
