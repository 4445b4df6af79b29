package record

import (
	"reflect"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
)

func TestShapeRanges(t *testing.T) {
	ids := func(n, l int) adapter.BatchShape {
		return adapter.BatchShape{"input_ids": {n, l}, "attention_mask": {n, l}, "labels": {n}}
	}
	for _, tc := range []struct {
		name string
		b    *adapter.Batches
		want []ShapeRange
	}{
		{"none", nil, nil},
		{"fixed", &adapter.Batches{Shapes: []adapter.BatchShape{ids(8, 512), ids(8, 512)}, Largest: ids(8, 512)}, nil},
		{
			"padded: tensors with one range share it",
			&adapter.Batches{Shapes: []adapter.BatchShape{ids(36, 384), ids(36, 1024), ids(36, 512)}, Largest: ids(36, 1024)},
			[]ShapeRange{{Tensors: []string{"attention_mask", "input_ids"}, Smallest: []int{36, 384}, Largest: []int{36, 1024}}},
		},
		{
			"the loader's largest counts though no step ran it",
			&adapter.Batches{Shapes: []adapter.BatchShape{{"batch": {4, 3, 224, 224}}}, Largest: adapter.BatchShape{"batch": {4, 3, 512, 384}}},
			[]ShapeRange{{Tensors: []string{"batch"}, Smallest: []int{4, 3, 224, 224}, Largest: []int{4, 3, 512, 384}}},
		},
		{
			"separate ranges, sorted by path",
			&adapter.Batches{Shapes: []adapter.BatchShape{{"1.boxes": {2, 4}, "0": {2, 3, 64, 64}}, {"1.boxes": {9, 4}, "0": {2, 3, 96, 64}}}},
			[]ShapeRange{
				{Tensors: []string{"0"}, Smallest: []int{2, 3, 64, 64}, Largest: []int{2, 3, 96, 64}},
				{Tensors: []string{"1.boxes"}, Smallest: []int{2, 4}, Largest: []int{9, 4}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShapeRanges(tc.b); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ShapeRanges = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestShapeRangeText(t *testing.T) {
	for _, tc := range []struct {
		r            ShapeRange
		text, length string
	}{
		{ShapeRange{Tensors: []string{"input_ids"}, Smallest: []int{36, 384}, Largest: []int{36, 2048}},
			"input_ids 36x384 … 36x2048", "input_ids length 384–2048"},
		{ShapeRange{Tensors: []string{"a", "b"}, Smallest: []int{4, 3, 224, 224}, Largest: []int{4, 3, 512, 384}},
			"a, b 4x3x224x224 … 4x3x512x384", "a, b 4x3x224x224 … 4x3x512x384"},
		{ShapeRange{Tensors: []string{"x"}, Smallest: []int{2}, Largest: []int{2, 2}}, "x 2 … 2x2", "x 2 … 2x2"},
		// The first dimension is no length: a batch's, or the rows of one
		// tensor per sample (a detection batch's boxes).
		{ShapeRange{Tensors: []string{"1"}, Smallest: []int{40, 4}, Largest: []int{561, 4}}, "1 40x4 … 561x4", "1 40x4 … 561x4"},
	} {
		if got := tc.r.Text(); got != tc.text {
			t.Errorf("Text = %q, want %q", got, tc.text)
		}
		if got := tc.r.LengthText(); got != tc.length {
			t.Errorf("LengthText = %q, want %q", got, tc.length)
		}
	}
}

// padded is the batches of a trial of a padded LM at size n: sequence
// lengths per step, the largest being the loader's longest.
func padded(n int, longest int, lengths ...int) *adapter.Batches {
	b := &adapter.Batches{Source: "dataloader", Varied: true, Largest: adapter.BatchShape{"input_ids": {n, longest}}}
	for _, l := range lengths {
		b.Shapes = append(b.Shapes, adapter.BatchShape{"input_ids": {n, l}})
	}
	return b
}

func TestInputShapes(t *testing.T) {
	worst := func(b *adapter.Batches) *adapter.Batches { b.WorstFirst, b.WorstSteps = true, 1; return b }
	whyNot := func(why string, b *adapter.Batches) *adapter.Batches { b.WhyNot = why; return b }
	ok := func(n, size int, b *adapter.Batches) Trial {
		return Trial{N: n, Size: size, Outcome: classify.OK, Batches: b}
	}
	for _, tc := range []struct {
		name           string
		trials         []Trial
		answer         int
		note, warning  string
		wantWhy        string
		wantShownTrial int
	}{
		{name: "no batches", trials: []Trial{{N: 1, Size: 8, Outcome: classify.OK}}, answer: 8},
		{name: "fixed shapes", trials: []Trial{ok(1, 8, &adapter.Batches{Source: "dataloader"})}, answer: 8},
		{
			name:   "worst first: the answer's trial's lengths",
			trials: []Trial{ok(1, 8, worst(padded(8, 2048, 2048, 384, 512))), ok(2, 36, worst(padded(36, 2048, 2048, 384, 640))), {N: 3, Size: 37, Outcome: classify.OOM}},
			answer: 36, wantShownTrial: 2,
			note: "input shapes varied (input_ids length 384–2048): trials ran the largest batches first",
		},
		{
			name:   "an iterable dataset: warned, never silent",
			trials: []Trial{ok(1, 36, whyNot("iterable dataset", padded(36, 1024, 384, 1024, 512)))},
			answer: 36, wantWhy: "iterable dataset", wantShownTrial: 1,
			warning: "input shapes varied (input_ids 36x384 … 36x1024) and trials could not run the largest batches first (iterable dataset): the answer holds for shapes up to the largest seen",
		},
		{
			name: "extended trials say how far they ran",
			trials: []Trial{ok(1, 36, func() *adapter.Batches {
				b := whyNot("no DataLoader", padded(36, 1024, 384, 1024, 512))
				b.ExtendedSteps, b.Bound = 17, "steps"
				return b
			}())},
			answer: 36, wantWhy: "no DataLoader", wantShownTrial: 1,
			warning: "input shapes varied (input_ids 36x384 … 36x1024) and trials could not run the largest batches first (no DataLoader): the answer holds for shapes up to the largest seen; trials ran up to 17 steps more, until the largest shape stopped growing",
		},
		{
			name:   "--worst-case off",
			trials: []Trial{ok(1, 72, whyNot(WorstCaseOff, padded(72, 1024, 384, 1024, 512)))},
			answer: 72, wantWhy: WorstCaseOff, wantShownTrial: 1,
			warning: "--worst-case off: input shapes varied (input_ids 72x384 … 72x1024) and trials ran the batches in the program's order: the answer holds for shapes up to the largest seen; leave --worst-case on to run the largest batches first",
		},
		{
			name:   "one trial that could not is enough to warn; no answer shows the largest size",
			trials: []Trial{ok(1, 8, worst(padded(8, 2048, 2048, 384))), {N: 2, Size: 16, Outcome: classify.OOM, Batches: padded(16, 512, 384, 512)}},
			answer: 0, wantWhy: "not said", wantShownTrial: 2,
			warning: "input shapes varied (input_ids 16x384 … 16x512) and trials could not run the largest batches first (not said): the answer holds for shapes up to the largest seen",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := InputShapesOf(tc.trials, tc.answer)
			if got := in.Note(); got != tc.note {
				t.Errorf("Note = %q, want %q", got, tc.note)
			}
			if got := in.Warning(); got != tc.warning {
				t.Errorf("Warning = %q, want %q", got, tc.warning)
			}
			if in == nil {
				return
			}
			if in.WhyNot != tc.wantWhy || in.Trial != tc.wantShownTrial {
				t.Errorf("why not %q, trial %d; want %q, %d", in.WhyNot, in.Trial, tc.wantWhy, tc.wantShownTrial)
			}
		})
	}
}

func TestInputShapesManyTensors(t *testing.T) {
	b := &adapter.Batches{Varied: true, WorstFirst: true, Shapes: []adapter.BatchShape{
		{"a": {1, 1}, "b": {1, 1, 1}, "c": {1, 1, 1, 1}, "d": {1, 1, 1, 1, 1}},
		{"a": {1, 2}, "b": {1, 1, 2}, "c": {1, 1, 1, 2}, "d": {1, 1, 1, 1, 2}},
	}}
	in := InputShapesOf([]Trial{{N: 1, Size: 1, Outcome: classify.OK, Batches: b}}, 1)
	want := "input shapes varied (a length 1–2; b length 1–2; c length 1–2; 1 more): trials ran the largest batches first"
	if got := in.Note(); got != want {
		t.Errorf("Note = %q, want %q", got, want)
	}
}

func TestSoakText(t *testing.T) {
	for _, tc := range []struct {
		s    Soak
		want string
	}{
		{Soak{Size: 282, Limit: 600, Seconds: 600, Outcome: classify.OK, Steps: 700}, "soaked 10m at 282: ran 10m (700 steps)"},
		{Soak{Size: 36, Limit: 600, Seconds: 600, Outcome: classify.OK, Steps: 700, WorstFirst: true},
			"soaked 10m at 36, the loader's largest batches first: ran 10m (700 steps)"},
		{Soak{Size: 36, Limit: 600, Seconds: 30, Outcome: classify.OOM, Steps: 2, WorstFirst: true},
			"soaked 10m at 36, the loader's largest batches first: out of memory after 2 steps"},
	} {
		if got := tc.s.SoakText(); got != tc.want {
			t.Errorf("SoakText = %q, want %q", got, tc.want)
		}
	}
}
