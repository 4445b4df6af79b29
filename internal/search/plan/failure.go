package plan

// Failure is what an out-of-memory error says, in bytes; zero is unknown.
// Allocated and Request are in the units of a trial's peak allocated
// memory (search.Memory.Allocated): the trial held Allocated when it asked
// for Request more and could get only Free.
type Failure struct {
	Request   uint64 `json:"request_bytes,omitempty"`   // the allocation that failed
	Allocated uint64 `json:"allocated_bytes,omitempty"` // the framework's allocated memory then
	Reserved  uint64 `json:"reserved_bytes,omitempty"`  // its allocator's reserved memory then
	// Process is what the process held on the device then, memory
	// outside the allocator included; 0 where the failure did not say.
	Process uint64 `json:"process_bytes,omitempty"`
	// Free is what the allocator could still have taken: the cap less
	// Reserved under an allocator cap, else the device's free memory.
	Free uint64 `json:"free_bytes,omitempty"`
	// Capped says an allocator cap decided the failure (a memory fraction,
	// JAX's pool): the allocator's own state, not the device's.
	Capped bool `json:"capped,omitempty"`
	// Exact says Request, Allocated and Reserved are the allocator's own
	// counters, to the byte, not an error message's rounded figures.
	Exact bool `json:"exact,omitempty"`
}

// Reached returns the allocated memory the trial could have reached when
// it failed (what it held and what it could still take), and whether the
// failure says so.
func (f Failure) Reached() (uint64, bool) {
	if f.Allocated == 0 || f.Request == 0 || f.Free == 0 || f.Free >= f.Request {
		return 0, false
	}
	return f.Allocated + f.Free, true
}

// PlanLimit returns the size at which the buffer that failed at size would
// fit what was free, size × free / request, when it was a step's planned
// buffer: a request that is most of what the trial needed (XLA asks its
// pool for one buffer a step, about in proportion to the batch near its
// boundary; docs/design/xla-pool-plan-limits.md). An allocator's single
// tensor (torch's, TensorFlow's without XLA) asks for less than it held,
// and says nothing of a plan. A part that does not grow with the batch
// (buffers the size of the parameters) puts the limit a little high, never
// low.
func (f Failure) PlanLimit(size int) (float64, bool) {
	if f.Request <= f.Free || f.Free == 0 || f.Request <= f.Allocated {
		return 0, false
	}
	return float64(size) * float64(f.Free) / float64(f.Request), true
}
