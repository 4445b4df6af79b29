package live

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
	ok := record.Trial{N: 6, Size: 282, Outcome: classify.OK, Seconds: 2.5,
		Allocated: 23788 * gib / 1000, Reserved: 23852 * gib / 1000, Device: 24594 * gib / 1000}
	for _, c := range []struct {
		allocatorOnly bool
		want          string
	}{
		{false, "trial 6: batch 282 ok in 2.5s, peak 24.59 GiB of 24.00 GiB"},
		{true, "trial 6: batch 282 ok in 2.5s, peak 23.85 GiB of 24.00 GiB"},
	} {
		if got := trialLine(ok, 24*gib, c.allocatorOnly); got != c.want {
			t.Errorf("allocatorOnly %v: %q, want %q", c.allocatorOnly, got, c.want)
		}
	}
	oom := record.Trial{N: 7, Size: 283, Outcome: classify.OOM, Seconds: 2.7,
		Allocated: 23756 * gib / 1000, Reserved: 23891 * gib / 1000, Device: 24633 * gib / 1000}
	if got := trialLine(oom, 24*gib, true); !strings.Contains(got, "needs more than 23.89 GiB of 24.00 GiB") {
		t.Errorf("failed trial: %q", got)
	}
}
