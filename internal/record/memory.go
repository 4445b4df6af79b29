package record

import "github.com/batchfit/batchfit/internal/units"

// A trial is shown with one memory figure, the same everywhere (the
// summary's table, a trial's progress line, the live display's bar, the HTML
// table, the chart): for a trial that ran, its peak; for one too large, the
// memory it held when it failed and the allocation it was refused, shown as
// "> 79.10 GiB", since all it proves is that the size needs more than that.
// A failed trial has no peak, and what it held is no peak either.

// Memory is the trial's figure in bytes: the larger of the framework's
// allocated peak and NVML's, for a trial that ran and for one too large,
// which needs more than what it held (needsMore), and at least what it held
// and asked for (Trial.OOM; less messageRounding when the figures are a
// message's, not the allocator's own); 0 when unknown, and for a crash,
// whose memory says nothing of its size. allocatorOnly says the memory
// limit held the framework's allocator only (--memory-limit-scope
// allocator): the figure is then the allocator's reserved memory, which the
// limit holds, not NVML's, which counts the CUDA context outside it.
func (t Trial) Memory(allocatorOnly bool) (bytes uint64, needsMore bool) {
	other := t.Device
	if allocatorOnly {
		other = t.Reserved
	}
	switch {
	case t.Outcome.Fits():
		return max(t.Allocated, other), false
	case t.Outcome.TooLarge():
		b := max(t.Allocated, other)
		if o := t.OOM; o != nil && o.Allocated > 0 && o.Request > 0 {
			asked := o.Allocated + o.Request
			if !o.Exact {
				asked = uint64(float64(asked) * (1 - messageRounding))
			}
			b = max(b, asked)
		}
		return b, b > 0
	}
	return 0, false
}

// messageRounding is how much an out-of-memory message's figures may
// overstate what they stand for: torch and XLA print two decimals in a unit
// the figure is at least one of ("4.93 GiB", "268.26MiB"), so half the last
// digit is at most 0.5 % of it.
const messageRounding = 0.005

// MemoryText is Memory in words: "23.80 GiB", or for a trial too large its
// figure after more ("> 74.57 GiB"; ">" in a narrow column), or none when it
// is unknown.
func (t Trial) MemoryText(allocatorOnly bool, more, none string) string {
	b, needsMore := t.Memory(allocatorOnly)
	switch {
	case b == 0:
		return none
	case needsMore:
		return more + units.Bytes(b)
	}
	return units.Bytes(b)
}
