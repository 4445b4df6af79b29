package record

import "math"

// DefaultMarginPercent is the share of memory the summary always shows a
// size for, beside the maximum, when --margin does not choose another:
// an answer that runs at 99 % of the card leaves nothing for a longer
// sequence, a fragmented allocator or another process.
const DefaultMarginPercent = 5

// Margin bases: how a margin's size is known.
const (
	// MarginSearched: --margin asked for it, and the search measured it: a
	// trial at the size ran with its peak within the share, and the next
	// size up was measured above it or did not run.
	MarginSearched = "searched"
	// MarginMeasured: the trials the search ran happen to prove it, as
	// for MarginSearched.
	MarginMeasured = "measured"
	// MarginModel: the memory model predicts it, between the largest size
	// measured within the share and the smallest measured above it.
	MarginModel = "model"
	// MarginUnknown: the run cannot say (no answer, no memory figures, or
	// no model to fill the gap); the size is null.
	MarginUnknown = "unknown"
)

// Margin is the largest batch size that leaves a share of memory free.
type Margin struct {
	Percent float64 `json:"percent"`
	// Size is that size; 0 (null in JSON) when it is unknown, or when no
	// size leaves that much free.
	Size  int    `json:"batch_size"`
	Basis string `json:"basis"`
	// Why says, when Basis is unknown or Size is 0, why there is no size.
	Why string `json:"why"`
}

// Margins are the run's margin sizes: the one --margin asked for, and the
// one at DefaultMarginPercent, in that order (one when they are the same
// share). Only the first is measured by the search itself; the default
// one comes from the trials that ran and the memory model.
func (r *Run) Margins() []Margin {
	var out []Margin
	if p := r.Settings.Margin; p > 0 {
		if r.Margin > 0 {
			out = append(out, Margin{Percent: p, Size: r.Margin, Basis: MarginSearched})
		} else {
			out = append(out, r.Headroom(p))
		}
		if p == DefaultMarginPercent {
			return out
		}
	}
	return append(out, r.Headroom(DefaultMarginPercent))
}

// ShownMargin is the margin the summary shows beside the maximum: the
// --margin share when it was given, else DefaultMarginPercent.
func (r *Run) ShownMargin() Margin {
	return r.Margins()[0]
}

// Headroom returns the largest size whose peak leaves percent of the
// capacity free, from the trials that ran: exact where a size within it and
// the next size up above it (or failing) were both measured; else the
// memory model's prediction, kept between what was measured; else unknown.
// It never runs a trial: --margin does, for an exact answer. Peaks are the
// figure the model fits (torch's allocated peak, else NVML's) against the
// capacity (a framework's pool, when smaller), as --margin measures them.
func (r *Run) Headroom(percent float64) Margin {
	m := Margin{Percent: percent, Basis: MarginUnknown}
	if r.Status != Found || r.Answer == 0 {
		m.Why = "no answer"
		return m
	}
	if r.GPU == nil || r.GPU.Capacity == 0 {
		m.Why = "the GPU's memory is unknown"
		return m
	}
	peak := r.peakFigure()
	if peak == nil {
		m.Why = "no memory figures"
		return m
	}
	limit := float64(r.capacity()) * (1 - percent/100)
	step := max(r.Settings.MultipleOf, 1)
	// lo: the largest size seen within the limit; hi: the smallest seen
	// above it or failing, the size past the answer at most.
	lo, hi := 0, r.Answer+step
	for _, t := range r.Trials {
		switch {
		case t.Busy || t.Phase == PhaseSoak:
		case !t.Outcome.Fits():
			hi = min(hi, t.Size)
		case t.Size > r.Answer:
		case peak(t) == 0:
		case float64(peak(t)) <= limit:
			lo = max(lo, t.Size)
		default:
			hi = min(hi, t.Size)
		}
	}
	if lo >= hi { // a size within the limit above one over it: trust the lower
		lo = 0
		for _, t := range r.Trials {
			if t.Outcome.Fits() && !t.Busy && t.Phase != PhaseSoak && t.Size < hi && peak(t) > 0 && float64(peak(t)) <= limit {
				lo = max(lo, t.Size)
			}
		}
	}
	if lo > 0 && hi-lo <= step {
		m.Size, m.Basis = lo, MarginMeasured
		return m
	}
	md := r.Model
	if md == nil || md.Slope <= 0 {
		m.Why = "no memory model to predict it between the sizes measured"
		return m
	}
	pred := int(math.Floor((limit-md.Intercept)/md.Slope)) / step * step
	pred = min(max(pred, lo), hi-step)
	m.Basis = MarginModel
	if pred < max(r.Settings.Min, 1) {
		m.Why = "the memory model predicts that no size leaves this much free"
		return m
	}
	m.Size = pred
	return m
}

// capacity is the memory a trial's peak must fit in: the card's (or
// --memory-limit), or a framework's pool limit when a trial reported a
// smaller one, as the search takes it.
func (r *Run) capacity() uint64 {
	c := r.GPU.Capacity
	for _, t := range r.Trials {
		if t.PoolLimit > 0 && t.PoolLimit < c {
			c = t.PoolLimit
		}
	}
	return c
}

// peakFigure returns how to read the peak the margin compares: the memory
// model's figure, or the first of allocated and NVML's that every trial
// that ran reports; nil when none does.
func (r *Run) peakFigure() func(Trial) uint64 {
	allocated := func(t Trial) uint64 { return t.Allocated }
	device := func(t Trial) uint64 { return t.Device }
	if r.Model != nil {
		switch r.Model.Figure {
		case "allocated":
			return allocated
		case "device":
			return device
		}
	}
	for _, f := range []func(Trial) uint64{allocated, device} {
		all, any := true, false
		for _, t := range r.Trials {
			if t.Outcome.Fits() && !t.Busy {
				any = true
				all = all && f(t) > 0
			}
		}
		if all && any {
			return f
		}
	}
	return nil
}
