package probe

import (
	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// FailureOf is what a trial that ran out of memory said about it: the
// figures of its OOM message (the exception the adapter reported, else the
// last in its output), and the allocation torch's OOM observer saw refused
// where the message gives none; the observer's counters, to the byte,
// where it read them (Exact, with no cap only when it read the device's free
// memory too), over the message's rounded ones. What the allocator could still take is
// the cap less what it had reserved under a cap (the message's "allowed",
// or the observer's limit below the device's total), else the device's
// free memory.
func FailureOf(outcome classify.Outcome, sum adapter.Summary, output []byte) search.Failure {
	if outcome != classify.OOM {
		return search.Failure{}
	}
	f := classify.ParseOOMFigures([]byte(sum.Exception))
	if o := classify.ParseOOMFigures(output); f.Tried == 0 || (o.Tried == f.Tried && f.Allowed == 0 && f.Allocated == 0) {
		// The output's copy of the same error can say more: XLA logs its
		// allocator's state before it, outside the exception.
		f = o
	}
	var req adapter.OOMRequest
	if n := len(sum.OOMRequests); n > 0 {
		req = sum.OOMRequests[n-1]
	}
	out := search.Failure{Request: f.Tried, Allocated: f.Allocated, Reserved: f.Reserved, Process: f.Process}
	if out.Request == 0 {
		out.Request = req.Bytes
	}
	if req.Bytes > 0 && req.Allocated > 0 && req.Reserved > 0 {
		out.Request, out.Allocated, out.Reserved, out.Exact = req.Bytes, req.Allocated, req.Reserved, true
	}
	total := f.Capacity
	if total == 0 {
		total = sum.DeviceTotal
	}
	capped := f.Allowed
	if capped == 0 && req.Limit > 0 && total > 0 && req.Limit < total {
		capped = req.Limit
	}
	switch {
	case capped > 0:
		out.Capped = true
		if out.Reserved > 0 && capped > out.Reserved {
			out.Free = capped - out.Reserved
		}
	case out.Exact && req.Free > 0:
		out.Free = req.Free // to the byte, as the counters beside it
	case f.Free > 0:
		out.Free = f.Free
		// The message's room is rounded: the state is not to the byte,
		// and two alike do not prove the size (capturedState).
		out.Exact = false
	default:
		out.Free = req.Free
	}
	return out
}

// oomFigures is the record's copy of f, or nil when it says nothing.
func oomFigures(f search.Failure) *record.OOMFigures {
	if f == (search.Failure{}) {
		return nil
	}
	return &record.OOMFigures{Request: f.Request, Allocated: f.Allocated, Reserved: f.Reserved, Free: f.Free,
		Process: f.Process, Capped: f.Capped, Exact: f.Exact}
}
