package report

import (
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/units"
)

// A trial is shown with one memory figure, the same everywhere (the
// summary's table, a trial's progress line, the live display's bar, the HTML
// table, the chart): for a trial that ran, its peak; for one too large, the
// memory it held when it failed, shown as "> 74.57 GiB", since all it proves
// is that the size needs more than that. A failed trial has no peak, and
// what it held is no peak either.

// trialMemory is a trial's figure in bytes: the larger of the framework's
// allocated peak and NVML's, for a trial that ran and for one too large,
// which needs more than what it held (needsMore); 0 when unknown, and for
// a crash, whose memory says nothing of its size.
func trialMemory(t record.Trial) (bytes uint64, needsMore bool) {
	switch {
	case t.Outcome.Fits():
		return max(t.Allocated, t.Device), false
	case t.Outcome.TooLarge():
		b := max(t.Allocated, t.Device)
		return b, b > 0
	}
	return 0, false
}

// memoryText is trialMemory in words: "23.80 GiB", or for a trial too
// large its figure after more ("> 74.57 GiB"; ">" in a narrow column), or
// none when it is unknown.
func memoryText(t record.Trial, more, none string) string {
	b, needsMore := trialMemory(t)
	switch {
	case b == 0:
		return none
	case needsMore:
		return more + units.Bytes(b)
	}
	return units.Bytes(b)
}
