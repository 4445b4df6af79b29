package record

import (
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

func TestHeadroom(t *testing.T) {
	const gib = 1 << 30
	// 100 GiB card: 5 % free is a peak of at most 95 GiB. Peaks are 1 GiB
	// a sample.
	trial := func(n, size int, outcome classify.Outcome) Trial {
		tr := Trial{N: n, Size: size, Outcome: outcome}
		if outcome.Fits() {
			tr.Allocated = uint64(size) * gib
		}
		return tr
	}
	base := func(trials ...Trial) *Run {
		return &Run{Status: Found, Answer: 99, FirstFailure: 100, Settings: Settings{Min: 1, MultipleOf: 1},
			GPU: &GPUInfo{Capacity: 100 * gib}, Trials: trials}
	}
	model := &Model{Figure: "allocated", Intercept: 0.5 * gib, Slope: gib}
	tests := []struct {
		name  string
		run   *Run
		size  int
		basis string
	}{
		{"measured by the trials", base(trial(1, 64, classify.OK), trial(2, 95, classify.OK), trial(3, 96, classify.OK),
			trial(4, 99, classify.OK), trial(5, 100, classify.OOM)), 95, MarginMeasured},
		{"predicted between what was measured", func() *Run {
			r := base(trial(1, 64, classify.OK), trial(2, 99, classify.OK), trial(3, 100, classify.OOM))
			r.Model = model
			return r
		}(), 94, MarginModel},
		{"a prediction kept below a size measured above the limit", func() *Run {
			r := base(trial(1, 64, classify.OK), trial(2, 90, classify.OK), trial(3, 99, classify.OK), trial(4, 100, classify.OOM))
			r.Model = &Model{Figure: "allocated", Slope: 0.5 * gib} // says 190: wrong
			r.Trials[1].Allocated = 96 * gib
			return r
		}(), 89, MarginModel},
		{"no model to fill the gap", base(trial(1, 64, classify.OK), trial(2, 99, classify.OK), trial(3, 100, classify.OOM)), 0, MarginUnknown},
		{"no memory figures", func() *Run {
			r := base(Trial{N: 1, Size: 99, Outcome: classify.OK}, Trial{N: 2, Size: 100, Outcome: classify.OOM})
			return r
		}(), 0, MarginUnknown},
		{"no capacity", func() *Run {
			r := base(trial(1, 95, classify.OK), trial(2, 99, classify.OK), trial(3, 100, classify.OOM))
			r.GPU = nil
			return r
		}(), 0, MarginUnknown},
		{"the answer leaves enough free", func() *Run {
			r := base(trial(1, 50, classify.OK), trial(2, 51, classify.OOM))
			r.Answer, r.FirstFailure = 50, 51
			return r
		}(), 50, MarginMeasured},
		{"a framework's pool is the capacity", func() *Run {
			// JAX's pool is 75 GiB of the card: 5 % free is 71.25 GiB.
			r := base(trial(1, 71, classify.OK), trial(2, 72, classify.OK), trial(3, 74, classify.OK), trial(4, 75, classify.OOM))
			r.Answer, r.FirstFailure = 74, 75
			for i := range r.Trials {
				r.Trials[i].PoolLimit = 75 * gib
			}
			return r
		}(), 71, MarginMeasured},
		{"no answer", &Run{Status: NothingFits, GPU: &GPUInfo{Capacity: 100 * gib}}, 0, MarginUnknown},
		{"a busy trial is not believed", func() *Run {
			r := base(trial(1, 95, classify.OK), trial(2, 96, classify.OK), trial(3, 99, classify.OK), trial(4, 100, classify.OOM))
			r.Trials[0].Busy = true
			return r
		}(), 0, MarginUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.run.Headroom(5)
			if m.Size != tc.size || m.Basis != tc.basis || m.Percent != 5 {
				t.Errorf("Headroom(5) = %+v, want size %d, basis %s", m, tc.size, tc.basis)
			}
			if m.Size == 0 && m.Why == "" {
				t.Errorf("Headroom(5) = %+v: no size and no reason", m)
			}
		})
	}
}

func TestMargins(t *testing.T) {
	const gib = 1 << 30
	r := &Run{Status: Found, Answer: 99, FirstFailure: 100, Settings: Settings{Min: 1, MultipleOf: 1, Margin: 10},
		GPU: &GPUInfo{Capacity: 100 * gib}, Margin: 90,
		Trials: []Trial{{N: 1, Size: 95, Outcome: classify.OK, Allocated: 95 * gib}, {N: 2, Size: 96, Outcome: classify.OK, Allocated: 96 * gib},
			{N: 3, Size: 99, Outcome: classify.OK, Allocated: 99 * gib}, {N: 4, Size: 100, Outcome: classify.OOM}}}
	got := r.Margins()
	want := []Margin{{Percent: 10, Size: 90, Basis: MarginSearched}, {Percent: 5, Size: 95, Basis: MarginMeasured}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Margins() = %+v, want %+v", got, want)
	}
	if s := r.ShownMargin(); s != want[0] {
		t.Errorf("ShownMargin() = %+v, want the --margin one", s)
	}
	r.Settings.Margin = 5
	if got := r.Margins(); len(got) != 1 || got[0].Basis != MarginSearched {
		t.Errorf("--margin 5%%: Margins() = %+v, want the searched one alone", got)
	}
}
