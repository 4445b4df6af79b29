package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/batchfit/batchfit/internal/adapter"
)

// Lengths are the sequence lengths of a simulated loader's batches, in
// its order (Workload.Lengths). As a flag: "384,512,2048".
type Lengths []int

func (l *Lengths) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// Set reads "384,512,2048".
func (l *Lengths) Set(s string) error {
	var out Lengths
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return fmt.Errorf("lengths: want positive integers separated by commas, got %q", s)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// The adapter's default for BATCHFIT_SHAPE_PATIENCE, which batchfit leaves
// unset: a trial whose shapes vary and that cannot run the largest first
// runs on until its largest shape has not grown for shapePatience steps.
// maxShapeSteps bounds it, as the program's own end would.
const (
	shapePatience = 20
	maxShapeSteps = 10_000
)

// schedule is the batches a trial's steps consume, one length a step, and
// what the adapter says of them.
type schedule struct {
	lengths []int
	batches adapter.Batches
}

// schedule plans a trial of steps steps at batch (the loader's own order,
// or its longest batch first when worstCase allows it), run on past steps
// while the longest length seen still grows when the loader cannot be
// reordered. A workload without Lengths has none.
func (w Workload) schedule(batch, steps int, worstCase bool, patience int) schedule {
	epoch := []int(w.Lengths)
	if len(epoch) == 0 {
		return schedule{}
	}
	longest := slices.Max(epoch)
	varied := slices.Min(epoch) != longest
	var s schedule
	b := &s.batches
	b.Source = "dataloader"
	switch {
	case varied && worstCase && !w.Iterable:
		// As the adapter serves them to a loop that takes one batch a
		// step: the epoch's first batch (the optimizer makes its state),
		// the longest, then the next longest, steps-1 batches in all,
		// then the loader's own order; a trial of one step takes the
		// longest at once. (The adapter's bound of 64 served and a
		// soak's epoch length are not simulated.)
		byLength := slices.Clone(epoch)
		slices.SortStableFunc(byLength, func(a, b int) int { return b - a })
		served := byLength[:min(max(steps-2, 1), len(epoch))]
		if steps >= 2 {
			served = append([]int{epoch[0]}, served...)
		}
		order := append(slices.Clone(served), epoch...)
		for i := range steps {
			s.lengths = append(s.lengths, order[i%len(order)])
		}
		b.WorstFirst, b.WorstSteps, b.ScannedBatches = true, min(len(served), steps), len(epoch)
	case varied && worstCase:
		b.WhyNot = "iterable dataset"
		s.lengths, b.ExtendedSteps, b.Bound = runOn(epoch, steps, patience)
	default:
		if varied {
			b.WhyNot = "off"
		}
		for i := range steps {
			s.lengths = append(s.lengths, epoch[i%len(epoch)])
		}
	}
	top := 0
	for i, l := range s.lengths {
		b.Shapes = append(b.Shapes, adapter.BatchShape{"input_ids": {batch, l}, "attention_mask": {batch, l}})
		if l > top {
			top, b.GrewAtStep = l, i+1
		}
	}
	if b.WorstFirst {
		top = longest
	}
	b.Largest = adapter.BatchShape{"input_ids": {batch, top}, "attention_mask": {batch, top}}
	b.Varied = varied && (b.WorstFirst || slices.Min(s.lengths) != slices.Max(s.lengths))
	if !b.Varied {
		b.WhyNot = ""
	}
	return s
}

// runOn is the lengths of a trial that cannot run the longest first: its
// steps, then more until the longest seen has not grown for patience
// steps, maxShapeSteps at most; extended counts the steps past steps, and
// bound says what ended them.
func runOn(epoch []int, steps, patience int) (lengths []int, extended int, bound string) {
	top, grew := 0, 0
	for i := 0; ; i++ {
		if i >= steps && i-grew >= patience {
			bound = "steps"
			break
		}
		if i >= maxShapeSteps {
			bound = "end"
			break
		}
		l := epoch[i%len(epoch)]
		if l > top {
			top, grew = l, i+1
		}
		lengths = append(lengths, l)
	}
	if len(lengths) <= steps {
		return lengths, 0, ""
	}
	return lengths, len(lengths) - steps, bound
}

// activations are the batch-dependent bytes of a step at length (part
// scaled by length over the longest); all of part without Lengths.
func (w Workload) activations(batch, length int) uint64 {
	part := w.part(batch)
	if len(w.Lengths) == 0 || length <= 0 {
		return part
	}
	longest := uint64(slices.Max(w.Lengths))
	hi, lo := part/longest, part%longest
	return satAdd(satMul(hi, uint64(length)), lo*uint64(length)/longest)
}
