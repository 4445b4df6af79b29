package caveat

import (
	"fmt"
	"os"
	"strings"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/units"
)

// Fragmentation is the warning for a boundary that fragmentation
// decided: the last failure at the first failing size had more memory
// free in all (what PyTorch reserved but had not allocated, and what it
// could still take) than it asked for, by at least a hundredth of the
// capacity, but not in one piece. Such a boundary moves with the
// allocator's layout: expandable segments may fit more, and a larger size
// may run where this one did not. On an H200 the LM on the whole card
// (151 asked 18.4 GiB with 35.0 GiB free in all; 152 and 160 ran) and the
// HF Trainer (72 under a 24 GiB cap: 4.4 GiB asked, 6.2 GiB free) warn;
// SimCLR (283: 0.12 GiB to spare) and Lightning (2004: too little) do not.
// "" when there is nothing to warn about: no exact figures, no capacity.
func Fragmentation(trials []record.Trial, firstFailure int, capacity uint64) string {
	var f *record.OOMFigures
	for _, t := range trials {
		if t.Size == firstFailure && t.OOM != nil {
			f = t.OOM
		}
	}
	if firstFailure == 0 || capacity == 0 || f == nil || !f.Exact || f.Request == 0 || f.Reserved < f.Allocated {
		return ""
	}
	cached := f.Reserved - f.Allocated
	spare := cached + f.Free
	if spare < f.Request || spare-f.Request < capacity/100 {
		return ""
	}
	tip := "; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True may fit more"
	if strings.Contains(os.Getenv("PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True") {
		tip = ""
	}
	return fmt.Sprintf("the first failure, at %d, asked for %s with %s free in all (%s reserved by PyTorch but unallocated, "+
		"%s more it could take), but not in one piece: fragmentation decided this boundary, and a larger size may run%s",
		firstFailure, units.Bytes(f.Request), units.Bytes(spare), units.Bytes(cached), units.Bytes(f.Free), tip)
}
