package record

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/batchfit/batchfit/internal/adapter"
)

// MaxShapeRanges bounds the ranges a run's input shapes show: the tensors
// that varied, a few at most, so that a batch of many tensors (a detection
// model's boxes, masks and labels) still reads as one line.
const MaxShapeRanges = 3

// WorstCaseOff is why_not when --worst-case off kept the adapter from
// running the largest batches first.
const WorstCaseOff = "off"

// ShapeRange is the smallest and the largest shape, by elements, that
// tensors whose shapes varied took over a trial's batches. Tensors with the
// same range share one ShapeRange (input_ids and its attention_mask).
type ShapeRange struct {
	Tensors  []string `json:"tensors"` // paths into the batch, sorted
	Smallest []int    `json:"smallest"`
	Largest  []int    `json:"largest"`
}

// Text is the range with its full shapes: "input_ids 36x384 … 36x2048".
func (r ShapeRange) Text() string {
	return fmt.Sprintf("%s %s … %s", strings.Join(r.Tensors, ", "), dims(r.Smallest), dims(r.Largest))
}

// LengthText is the range of the one dimension that varied, when only one
// did and it is not the first (a batch's, or the rows of one tensor per
// sample), as padding to the longest sequence makes it: "input_ids length
// 384–2048"; else Text.
func (r ShapeRange) LengthText() string {
	if len(r.Smallest) != len(r.Largest) {
		return r.Text()
	}
	at := -1
	for i := range r.Smallest {
		if r.Smallest[i] != r.Largest[i] {
			if at >= 0 {
				return r.Text()
			}
			at = i
		}
	}
	if at < 1 {
		return r.Text()
	}
	return fmt.Sprintf("%s length %d–%d", strings.Join(r.Tensors, ", "), r.Smallest[at], r.Largest[at])
}

func dims(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	if len(parts) == 0 {
		return "scalar"
	}
	return strings.Join(parts, "x")
}

// elements is how many elements a tensor of shape holds.
func elements(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// ShapeRanges are the ranges of the tensors whose shapes varied over b's
// batches (the steps' and the largest), sorted by tensor path; nil when
// none varied.
func ShapeRanges(b *adapter.Batches) []ShapeRange {
	if b == nil {
		return nil
	}
	small, large := map[string][]int{}, map[string][]int{}
	varied := map[string]bool{}
	for _, batch := range append(slices.Clone(b.Shapes), b.Largest) {
		for path, shape := range batch {
			s, seen := small[path]
			if !seen {
				small[path], large[path] = shape, shape
				continue
			}
			if !slices.Equal(s, shape) || !slices.Equal(large[path], shape) {
				varied[path] = true
			}
			if elements(shape) < elements(s) {
				small[path] = shape
			}
			if elements(shape) > elements(large[path]) {
				large[path] = shape
			}
		}
	}
	var out []ShapeRange
	for _, path := range slices.Sorted(maps.Keys(varied)) {
		i := slices.IndexFunc(out, func(r ShapeRange) bool {
			return slices.Equal(r.Smallest, small[path]) && slices.Equal(r.Largest, large[path])
		})
		if i >= 0 {
			out[i].Tensors = append(out[i].Tensors, path)
			continue
		}
		out = append(out, ShapeRange{Tensors: []string{path}, Smallest: small[path], Largest: large[path]})
	}
	return out
}

// InputShapes is what a run's trials say of their batches' shapes, when
// they varied: the ranges seen at the answer, and whether the trials ran
// the loader's largest batches first. A few steps of a program whose
// batches vary meet only those steps' batches; the answer holds for the
// whole training only if the largest ran.
type InputShapes struct {
	// WorstFirst says every trial whose shapes varied ran the loader's
	// largest batches first.
	WorstFirst bool `json:"worst_first"`
	// WhyNot is why some could not (adapter.Batches.WhyNot; WorstCaseOff
	// for --worst-case off); "" when they all did.
	WhyNot string `json:"why_not"`
	// ExtendedSteps are the most steps a trial ran past --steps because
	// its largest shape still grew; Bound what ended that trial.
	ExtendedSteps int    `json:"extended_steps"`
	Bound         string `json:"bound"`
	// Trial is the trial whose ranges are shown: the answer's, else the
	// largest size whose shapes varied.
	Trial  int          `json:"trial"`
	Ranges []ShapeRange `json:"ranges"`
}

// InputShapesOf reads trials for what their batches' shapes say; nil when
// no trial saw shapes vary. answer picks the trial whose ranges are shown.
func InputShapesOf(trials []Trial, answer int) *InputShapes {
	var in *InputShapes
	var shown *Trial
	for i := range trials {
		t := &trials[i]
		b := t.Batches
		if b == nil || !b.Varied {
			continue
		}
		if in == nil {
			in = &InputShapes{WorstFirst: true}
		}
		if !b.WorstFirst {
			in.WorstFirst = false
			if in.WhyNot == "" {
				in.WhyNot = b.WhyNot
			}
		}
		if b.ExtendedSteps > in.ExtendedSteps {
			in.ExtendedSteps, in.Bound = b.ExtendedSteps, b.Bound
		}
		if ShapeRanges(b) == nil {
			continue
		}
		switch {
		case shown == nil,
			t.Size == answer && t.Phase != PhaseSoak && (shown.Size != answer || shown.Phase == PhaseSoak),
			shown.Size != answer && t.Size > shown.Size:
			shown = t
		}
	}
	if in == nil {
		return nil
	}
	if !in.WorstFirst && in.WhyNot == "" {
		in.WhyNot = "not said"
	}
	if shown != nil {
		in.Trial = shown.N
		in.Ranges = ShapeRanges(shown.Batches)
	}
	return in
}

// Seen is the ranges seen, the first MaxShapeRanges of them: "input_ids
// 36x384 … 36x2048; pixel_values 36x3x224x224 … 36x3x448x448".
func (in *InputShapes) Seen() string {
	return in.seen(ShapeRange.Text)
}

func (in *InputShapes) seen(text func(ShapeRange) string) string {
	var parts []string
	for _, r := range in.Ranges[:min(len(in.Ranges), MaxShapeRanges)] {
		parts = append(parts, text(r))
	}
	if more := len(in.Ranges) - MaxShapeRanges; more > 0 {
		parts = append(parts, fmt.Sprintf("%d more", more))
	}
	return strings.Join(parts, "; ")
}

// rangesText is the ranges seen in parentheses, each written by text, or
// "" when there are none.
func (in *InputShapes) rangesText(text func(ShapeRange) string) string {
	if s := in.seen(text); s != "" {
		return " (" + s + ")"
	}
	return ""
}

// Note says what the trials did about shapes that varied, for the
// summary: "input shapes varied (input_ids length 384–2048): trials ran
// the largest batches first"; "" when they did not vary, or when Warning
// says it instead.
func (in *InputShapes) Note() string {
	if in == nil || !in.WorstFirst {
		return ""
	}
	return "input shapes varied" + in.rangesText(ShapeRange.LengthText) + ": trials ran the largest batches first"
}

// Warning says that the trials could not run the largest batches first,
// so that the answer holds only for the shapes they met: "input shapes
// varied (input_ids 36x384 … 36x1024) and trials could not run the largest
// batches first (iterable dataset): the answer holds for shapes up to the
// largest seen"; "" when they did, or shapes did not vary.
func (in *InputShapes) Warning() string {
	if in == nil || in.WorstFirst {
		return ""
	}
	seen := "input shapes varied" + in.rangesText(ShapeRange.Text)
	if in.WhyNot == WorstCaseOff {
		return "--worst-case off: " + seen + " and trials ran the batches in the program's order: the answer holds for shapes up to the largest seen; leave --worst-case on to run the largest batches first"
	}
	msg := fmt.Sprintf("%s and trials could not run the largest batches first (%s): the answer holds for shapes up to the largest seen", seen, in.WhyNot)
	if in.ExtendedSteps > 0 {
		msg += fmt.Sprintf("; trials ran up to %d steps more, until %s", in.ExtendedSteps, boundText(in.Bound))
	}
	return msg
}

// boundText says what ended an extended trial (adapter.Batches.Bound).
func boundText(bound string) string {
	switch bound {
	case "steps":
		return "the largest shape stopped growing"
	case "time":
		return "their time ran out"
	case "end":
		return "the program ended"
	}
	return "they stopped"
}
