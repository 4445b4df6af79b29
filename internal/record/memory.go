package record

import "github.com/batchfit/batchfit/internal/units"

// A trial is shown with one memory figure, the same everywhere (the
// summary's table, a trial's progress line, the live display's bar, the HTML
// table, the chart, the JSON's "needed"): for a trial that ran, its
// peak; for one too large, what it needed at least (Needed), shown as
// "> 79.99 GiB", since all it proves is that the size needs more than the
// memory it had. A failed trial has no peak, and what it held is no peak
// either.

// Need is what a trial too large for its memory needed at least, and how
// that is known.
type Need struct {
	Bytes uint64
	// Basis is how Bytes is known: NeedPeak, NeedRequest or NeedProcess;
	// "" when nothing is.
	Basis string
	// Device says Bytes is device memory, as NVML counts it (the CUDA
	// context included), not the allocator's: a table shows it under its
	// device column.
	Device bool
}

// The bases of a Need, from the weakest evidence to the most complete.
const (
	// NeedPeak: the memory it was measured holding before it failed (the
	// framework's allocated peak or NVML's).
	NeedPeak = "peak"
	// NeedRequest: what the allocator held at the out-of-memory error plus
	// the allocation it was refused.
	NeedRequest = "request"
	// NeedProcess: what the process held on the device at the
	// out-of-memory error (the CUDA context and all memory outside the
	// allocator included), less the allocator's cached but unused memory,
	// plus the allocation it was refused: the device memory the size
	// needs, as a trial that ran is measured by NVML.
	NeedProcess = "process"
)

// Needed is what a trial too large (Outcome.TooLarge) needed at least, in
// the terms of the figure a trial that ran is shown by (Memory): the
// largest of its measured peak, the allocator's memory and refused request
// at the out-of-memory error, and, but under an allocator-only limit, the
// process's device memory then with the request. A message's figures are
// taken at the least they can stand for (messageLow). The zero Need for
// other outcomes and when nothing is known. allocatorOnly as for Memory.
func (t Trial) Needed(allocatorOnly bool) Need {
	if !t.Outcome.TooLarge() {
		return Need{}
	}
	var n Need
	take := func(b uint64, basis string, device bool) {
		if b > n.Bytes {
			n = Need{Bytes: b, Basis: basis, Device: device}
		}
	}
	take(t.Allocated, NeedPeak, false)
	if allocatorOnly {
		take(t.Reserved, NeedPeak, false)
	} else {
		take(t.Device, NeedPeak, true)
	}
	o := t.OOM
	if o == nil || o.Request == 0 {
		return n
	}
	low := func(b uint64) uint64 {
		if o.Exact {
			return b
		}
		return messageLow(b)
	}
	if o.Allocated > 0 {
		take(low(o.Allocated)+low(o.Request), NeedRequest, false)
	}
	if !allocatorOnly && o.Process > 0 {
		cached := uint64(0)
		if o.Reserved > o.Allocated {
			cached = o.Reserved - o.Allocated
			if !o.Exact {
				cached += messageSlack(cached)
			}
		}
		if p := messageLow(o.Process) + low(o.Request); p > cached {
			take(p-cached, NeedProcess, true)
		}
	}
	return n
}

// messageLow is the least a figure of an out-of-memory message may stand
// for (messageSlack).
func messageLow(b uint64) uint64 { return b - messageSlack(b) }

// messageSlack is how much a figure of an out-of-memory message may
// overstate what it stands for: torch and XLA print two decimals of the
// largest unit the figure is at least one of ("4.93 GiB", "268.26MiB"), so
// half the last digit of that unit; bytes are printed whole.
func messageSlack(b uint64) uint64 {
	unit := uint64(1)
	for unit < 1<<40 && unit<<10 <= b {
		unit <<= 10
	}
	if unit == 1 {
		return 0
	}
	return unit / 200
}

// Memory is the trial's figure in bytes: for a trial that ran, the larger
// of the framework's allocated peak and NVML's; for one too large, what it
// needed at least (Needed), which it needs more than (needsMore); 0 when
// unknown, and for a crash, whose memory says nothing of its size.
// allocatorOnly says the memory limit held the framework's allocator only
// (--memory-limit-scope allocator): the figure is then the allocator's
// reserved memory, which the limit holds, not NVML's, which counts the
// CUDA context outside it.
func (t Trial) Memory(allocatorOnly bool) (bytes uint64, needsMore bool) {
	if t.Outcome.TooLarge() {
		n := t.Needed(allocatorOnly)
		return n.Bytes, n.Bytes > 0
	}
	if !t.Outcome.Fits() {
		return 0, false
	}
	other := t.Device
	if allocatorOnly {
		other = t.Reserved
	}
	return max(t.Allocated, other), false
}

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
