package sim

import (
	"reflect"
	"slices"
	"testing"
)

func TestSchedule(t *testing.T) {
	padded := Workload{Lengths: Lengths{384, 512, 1024, 640, 2048, 768}}
	iterable := padded
	iterable.Iterable = true
	for _, tc := range []struct {
		name       string
		w          Workload
		steps      int
		worstCase  bool
		patience   int
		lengths    []int
		worstFirst bool
		whyNot     string
		extended   int
		grewAt     int
		bound      string
		largest    int
	}{
		{name: "no lengths", w: Workload{}, steps: 3, worstCase: true},
		{name: "worst first: the epoch's first, the longest, then the loader's order", w: padded, steps: 3, worstCase: true,
			lengths: []int{384, 2048, 384}, worstFirst: true, grewAt: 2, largest: 2048},
		{name: "worst first, five steps: the first, the longest, the next longest, then the loader's", w: padded, steps: 5, worstCase: true,
			lengths: []int{384, 2048, 1024, 768, 384}, worstFirst: true, grewAt: 2, largest: 2048},
		{name: "worst first, one step: the longest at once", w: padded, steps: 1, worstCase: true,
			lengths: []int{2048}, worstFirst: true, grewAt: 1, largest: 2048},
		{name: "off: the loader's first batches", w: padded, steps: 3, worstCase: false,
			lengths: []int{384, 512, 1024}, whyNot: "off", grewAt: 3, largest: 1024},
		{name: "iterable: runs on until the longest stops growing", w: iterable, steps: 3, worstCase: true, patience: 4,
			lengths: []int{384, 512, 1024, 640, 2048, 768, 384, 512, 1024}, whyNot: "iterable dataset", extended: 6, grewAt: 5, bound: "steps", largest: 2048},
		{name: "iterable and off: no extension", w: iterable, steps: 3, worstCase: false,
			lengths: []int{384, 512, 1024}, whyNot: "off", grewAt: 3, largest: 1024},
		{name: "fixed lengths", w: Workload{Lengths: Lengths{512, 512}}, steps: 3, worstCase: true,
			lengths: []int{512, 512, 512}, grewAt: 1, largest: 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.w.schedule(8, tc.steps, tc.worstCase, tc.patience)
			if !slices.Equal(s.lengths, tc.lengths) {
				t.Fatalf("lengths %v, want %v", s.lengths, tc.lengths)
			}
			if tc.lengths == nil {
				return
			}
			b := s.batches
			if b.WorstFirst != tc.worstFirst || b.WhyNot != tc.whyNot || b.ExtendedSteps != tc.extended || b.GrewAtStep != tc.grewAt || b.Bound != tc.bound {
				t.Errorf("batches %+v", b)
			}
			if got := b.Largest["input_ids"]; !reflect.DeepEqual(got, []int{8, tc.largest}) || len(b.Shapes) != len(tc.lengths) {
				t.Errorf("largest %v, %d shapes; want [8 %d], %d", got, len(b.Shapes), tc.largest, len(tc.lengths))
			}
			if b.Varied != (tc.whyNot != "" || tc.worstFirst) {
				t.Errorf("varied %v", b.Varied)
			}
		})
	}
}

func TestActivations(t *testing.T) {
	w := testWorkload()
	if got, want := w.activations(10, 0), w.part(10); got != want {
		t.Errorf("no lengths: %d, want part %d", got, want)
	}
	w.Lengths = Lengths{512, 2048}
	if got, want := w.activations(10, 2048), w.part(10); got != want {
		t.Errorf("the longest: %d, want part %d", got, want)
	}
	if got, want := w.activations(10, 512), w.part(10)/4; got != want {
		t.Errorf("a quarter of the longest: %d, want %d", got, want)
	}
}

// TestChildLengths: a trial of a padded loader meets the longest batch in
// its first step unless told --worst-case off, and says so in its report.
func TestChildLengths(t *testing.T) {
	card, w := testCard(t), testWorkload()
	w.Lengths = Lengths{512, 1024, 2048}
	max := w.TrueMax(card, 1, 1, 1000, 1)
	worst := runTrial(t, card, w, max+1)
	if worst.code != 1 {
		t.Fatalf("worst first above the longest's max: exit %d", worst.code)
	}
	off := runTrial(t, card, w, max+1, "BATCHFIT_WORST_CASE=0", "BATCHFIT_STEPS=2")
	if off.code != 0 {
		t.Fatalf("--worst-case off, two steps (512, 1024): exit %d, stderr %q", off.code, off.stderr)
	}
	ev := off.event(t)
	b := ev.Batches
	if b == nil || !b.Varied || b.WorstFirst || b.WhyNot != "off" || len(b.Shapes) != 2 || len(ev.StepPeaks) != 2 || ev.StepPeaks[1] <= ev.StepPeaks[0] {
		t.Errorf("off event: %+v, batches %+v", ev, b)
	}
	ok := runTrial(t, card, w, max)
	if ok.code != 0 {
		t.Fatalf("worst first at max: exit %d, stderr %q", ok.code, ok.stderr)
	}
	if b := ok.event(t).Batches; b == nil || !b.WorstFirst || b.WorstSteps != 2 || b.Shapes[1]["input_ids"][1] != 2048 {
		t.Errorf("worst first batches %+v", b)
	}
}
