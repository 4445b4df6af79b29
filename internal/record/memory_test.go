package record

import (
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

// A failure that says what it held and asked for needs at least their sum,
// when that is more than the memory it reached (SimCLR's 283 under the
// 24 GiB cap asked for 56 MiB with 23.76 GiB allocated: less than it had
// reserved). A message's figures are rounded (two decimals), so each is
// taken less half its last digit; the allocator's own counters (Exact) to
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
		{&OOMFigures{Allocated: 23800 * gib / 1000, Request: 560 * mib}, "> 24.34 GiB"},
	} {
		oom.OOM = c.figures
		if got := oom.MemoryText(true, "> ", "-"); got != c.want {
			t.Errorf("figures %+v: %q, want %q", c.figures, got, c.want)
		}
	}
}

// On a whole card a failure needs what the process held on the device (the
// CUDA context included) less the allocator's unused cache, plus what it
// asked for: the figure of NVML's peaks, so that it lies above the peak of
// the size below it that ran. The figures are the simulated H100's at 953,
// whose 952 peaked at 79.92 GiB by NVML and 79.42 GiB allocated.
func TestFailureNeedsTheProcessMemory(t *testing.T) {
	const gib = 1 << 30
	oom := Trial{Size: 953, Outcome: classify.OOM, Allocated: 80071122764, Reserved: 80071360512,
		OOM: &OOMFigures{Request: 5293547192, Allocated: 80068927816, Reserved: 80069165568, Free: 5293547192, Process: 80605798728}}
	n := oom.Needed(false)
	if n.Basis != NeedProcess || !n.Device || n.Bytes <= 85815459840 || n.Bytes > 80*gib {
		t.Errorf("Needed = %+v, want the process's memory with the request, above 952's 85815459840 and within the card", n)
	}
	// Under an allocator-only limit the figure is the allocator's: what it
	// held and asked for, above 952's allocated 85277061201.
	n = oom.Needed(true)
	if n.Basis != NeedRequest || n.Device || n.Bytes <= 85277061201 {
		t.Errorf("Needed(allocator only) = %+v, want the allocator's held and asked, above 952's 85277061201", n)
	}
	if ok := (Trial{Outcome: classify.OK, Allocated: gib}).Needed(false); ok != (Need{}) {
		t.Errorf("a trial that ran needs %+v, want nothing", ok)
	}
}
