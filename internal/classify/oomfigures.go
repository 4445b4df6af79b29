package classify

import (
	"bytes"
	"regexp"
)

// OOMFigures are the figures an out-of-memory message gives, in bytes;
// zero is unknown.
type OOMFigures struct {
	Tried    uint64 // the allocation that failed
	Capacity uint64 // the device's total memory
	Free     uint64 // the device's free memory
	// Allowed is the process's cap under per_process_memory_fraction
	// ("6.99 GiB allowed;"), which bounds the allocator's reserved memory.
	Allowed uint64
	// Allocated is what PyTorch had allocated, and Reserved what its
	// caching allocator held in all (allocated and cached), when the
	// allocation failed.
	Allocated, Reserved uint64
	// Process is what the process held on the device, CUDA context and
	// other memory outside PyTorch included ("this process has 75.07 GiB
	// memory in use").
	Process uint64
}

var (
	oomAllowed   = regexp.MustCompile(size + ` allowed;`)
	oomAllocated = regexp.MustCompile(size + ` is allocated by PyTorch`)
	oomUnalloc   = regexp.MustCompile(size + ` is reserved by PyTorch but unallocated`)
	oomProcess   = regexp.MustCompile(`this process has ` + size + ` memory in use`)
	// PyTorch before 2.0: "4.36 GiB already allocated; ...; 4.63 GiB
	// reserved in total by PyTorch", and in 1.0 "150.86 MiB cached".
	oomAllocatedOld = regexp.MustCompile(size + ` already allocated`)
	oomReservedOld  = regexp.MustCompile(size + ` reserved in total by PyTorch`)
	oomCachedOld    = regexp.MustCompile(size + ` cached\)`)
	// XLA's BFC allocator: "Out of memory while trying to allocate
	// 200.00GiB", "trying to allocate 4770354232 bytes."
	xlaTried = regexp.MustCompile(`trying to allocate (\d+(?:\.\d+)?) ?(bytes|KiB|MiB|GiB|TiB)`)
	// The state XLA's BFC allocator logs before that error ("Stats:"):
	// the pool's limit and what was in use, "Limit:   23.90GiB",
	// "InUse:  268.26MiB" (bare numbers are bytes: "B" and "" read so).
	bfcLimit = regexp.MustCompile(`\bLimit:\s+(\d+(?:\.\d+)?)\s?(B|bytes|KiB|MiB|GiB|TiB)?`)
	bfcInUse = regexp.MustCompile(`\bInUse:\s+(\d+(?:\.\d+)?)\s?(B|bytes|KiB|MiB|GiB|TiB)?`)
)

// ParseOOMFigures reads the last out-of-memory message in output that gives
// figures: PyTorch's (every form ParseTorchOOM knows, with what PyTorch
// had allocated and reserved) or XLA's (the allocation that failed, and
// from the BFC allocator's state logged before it, when there is one, the
// pool's limit as Allowed and what was in use as Allocated and Reserved:
// the pool holds the whole limit, and what is not in use is free in it).
func ParseOOMFigures(output []byte) OOMFigures {
	var f OOMFigures
	torch := bytes.LastIndex(output, []byte("out of memory. Tried to allocate"))
	xla := bytes.LastIndex(output, []byte("trying to allocate"))
	if torch < 0 && xla < 0 {
		return f
	}
	if xla > torch {
		f.Tried, _ = parseSize(lineAt(output, xla), xlaTried)
		if i := bytes.LastIndex(output[:xla], []byte("Stats:")); i >= 0 {
			stats := output[i:xla]
			f.Allowed, _ = parseSize(stats, bfcLimit)
			if u, ok := parseSize(stats, bfcInUse); ok {
				f.Allocated, f.Reserved = u, u
			}
		}
		return f
	}
	line := lineAt(output, torch)
	f.Tried, _ = parseSize(line, oomTried)
	f.Capacity, _ = parseSize(line, oomCapacity, oomCapacityOld)
	f.Free, _ = parseSize(line, oomFree, oomFreeOld)
	f.Allowed, _ = parseSize(line, oomAllowed)
	f.Process, _ = parseSize(line, oomProcess)
	if a, ok := parseSize(line, oomAllocated); ok {
		f.Allocated = a
		if u, ok := parseSize(line, oomUnalloc); ok {
			f.Reserved = a + u
		}
		return f
	}
	f.Allocated, _ = parseSize(line, oomAllocatedOld)
	if r, ok := parseSize(line, oomReservedOld); ok {
		f.Reserved = r
	} else if c, ok := parseSize(line, oomCachedOld); ok && f.Allocated > 0 {
		f.Reserved = f.Allocated + c
	}
	return f
}

// lineAt returns output from i to the end of its line.
func lineAt(output []byte, i int) []byte {
	line := output[i:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	return line
}
