package report

import (
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
)

// Under a limit that holds the allocator only, a trial is shown by the
// reserved memory the limit holds: NVML's figure counts the CUDA context
// outside it and would read as above the limit. Otherwise NVML's.
func TestTrialLineUsesTheFigureTheLimitHolds(t *testing.T) {
	const gib = 1 << 30
	ok := record.Trial{N: 6, Size: 282, Outcome: classify.OK, Seconds: 2.5,
		Allocated: 23788 * gib / 1000, Reserved: 23852 * gib / 1000, Device: 24594 * gib / 1000}
	for _, c := range []struct {
		allocatorOnly bool
		want          string
	}{
		{false, "trial 6: batch 282 ok in 2.5s, peak 24.59 GiB of 24.00 GiB"},
		{true, "trial 6: batch 282 ok in 2.5s, peak 23.85 GiB of 24.00 GiB"},
	} {
		if got := TrialLine(ok, 24*gib, c.allocatorOnly); got != c.want {
			t.Errorf("allocatorOnly %v: %q, want %q", c.allocatorOnly, got, c.want)
		}
	}
	oom := record.Trial{N: 7, Size: 283, Outcome: classify.OOM, Seconds: 2.7,
		Allocated: 23756 * gib / 1000, Reserved: 23891 * gib / 1000, Device: 24633 * gib / 1000}
	if got := TrialLine(oom, 24*gib, true); !strings.Contains(got, "needs more than 23.89 GiB of 24.00 GiB") {
		t.Errorf("failed trial: %q", got)
	}
}

// A failure that says what it held and asked for needs at least their sum,
// when that is more than the memory it reached (SimCLR's 283 under the
// 24 GiB cap asked for 56 MiB with 23.76 GiB allocated: less than it had
// reserved). A message's figures are rounded (two decimals), so their sum
// is taken less messageRounding; the allocator's own counters (Exact) to
// the byte.
func TestFailureNeedsWhatItHeldAndAskedFor(t *testing.T) {
	const gib, mib = 1 << 30, 1 << 20
	oom := record.Trial{N: 7, Size: 283, Outcome: classify.OOM, Seconds: 2.7,
		Allocated: 23756 * gib / 1000, Reserved: 23891 * gib / 1000}
	for _, c := range []struct {
		figures *record.OOMFigures
		want    string
	}{
		{nil, "needs more than 23.89 GiB"}, // what it reserved
		{&record.OOMFigures{Allocated: 23800 * gib / 1000, Request: 56 * mib}, "needs more than 23.89 GiB"},
		{&record.OOMFigures{Allocated: 23800 * gib / 1000, Request: 560 * mib, Exact: true}, "needs more than 24.35 GiB"},
		{&record.OOMFigures{Allocated: 23800 * gib / 1000, Request: 560 * mib}, "needs more than 24.23 GiB"},
	} {
		oom.OOM = c.figures
		if got := TrialLine(oom, 24*gib, true); !strings.Contains(got, c.want) {
			t.Errorf("figures %+v: %q, want %q", c.figures, got, c.want)
		}
	}
}
