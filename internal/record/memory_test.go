package record

import (
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

// A failure that says what it held and asked for needs at least their sum,
// when that is more than the memory it reached (SimCLR's 283 under the
// 24 GiB cap asked for 56 MiB with 23.76 GiB allocated: less than it had
// reserved). A message's figures are rounded (two decimals), so their sum
// is taken less messageRounding; the allocator's own counters (Exact) to
// the byte.
func TestFailureNeedsWhatItHeldAndAskedFor(t *testing.T) {
	const gib, mib = 1 << 30, 1 << 20
	oom := Trial{N: 7, Size: 283, Outcome: classify.OOM, Seconds: 2.7,
		Allocated: 23756 * gib / 1000, Reserved: 23891 * gib / 1000}
	for _, c := range []struct {
		figures *OOMFigures
		want    string
	}{
		{nil, "> 23.89 GiB"}, // what it reserved
		{&OOMFigures{Allocated: 23800 * gib / 1000, Request: 56 * mib}, "> 23.89 GiB"},
		{&OOMFigures{Allocated: 23800 * gib / 1000, Request: 560 * mib, Exact: true}, "> 24.35 GiB"},
		{&OOMFigures{Allocated: 23800 * gib / 1000, Request: 560 * mib}, "> 24.23 GiB"},
	} {
		oom.OOM = c.figures
		if got := oom.MemoryText(true, "> ", "-"); got != c.want {
			t.Errorf("figures %+v: %q, want %q", c.figures, got, c.want)
		}
	}
}
