package record

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
)

func TestThroughput(t *testing.T) {
	// Step times are powers of two, so the expected figures are exact.
	tests := []struct {
		name  string
		trial Trial
		want  float64
	}{
		{"odd count: the middle step", Trial{Size: 8, Outcome: classify.OK, StepTimes: []float64{0.5, 0.125, 0.25}}, 32},
		{"even count: the mean of the two middle steps", Trial{Size: 3, Outcome: classify.OK, StepTimes: []float64{2, 0.125, 0.5, 0.25}}, 8},
		{"a slow first step does not count", Trial{Size: 64, Outcome: classify.OK, StepTimes: []float64{16, 0.5, 0.5}}, 128},
		{"one step", Trial{Size: 4, Outcome: classify.OK, StepTimes: []float64{0.5}}, 8},
		{"no step times", Trial{Size: 8, Outcome: classify.OK}, 0},
		{"zero step time", Trial{Size: 8, Outcome: classify.OK, StepTimes: []float64{0}}, 0},
		{"oom after some steps", Trial{Size: 8, Outcome: classify.OOM, StepTimes: []float64{0.25, 0.25}}, 0},
		{"timed out after some steps", Trial{Size: 8, Outcome: classify.Timeout, StepTimes: []float64{0.25}}, 0},
		{"crashed after some steps", Trial{Size: 8, Outcome: classify.Crash, StepTimes: []float64{0.25}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps := slices.Clone(tt.trial.StepTimes)
			if got := tt.trial.Throughput(); got != tt.want {
				t.Errorf("Throughput = %v, want %v", got, tt.want)
			}
			if !slices.Equal(tt.trial.StepTimes, steps) {
				t.Errorf("Throughput reordered the step times: %v, were %v", tt.trial.StepTimes, steps)
			}
		})
	}
}

func TestLastFailure(t *testing.T) {
	trial := func(n, size int, o classify.Outcome) Trial { return Trial{N: n, Size: size, Outcome: o} }
	tests := []struct {
		name   string
		trials []Trial
		size   int
		want   int // the N of the trial returned; 0 for nil
	}{
		{"no trials", nil, 64, 0},
		{"only fits at the size", []Trial{trial(1, 64, classify.OK), trial(2, 64, classify.OK)}, 64, 0},
		{"failures at other sizes only", []Trial{trial(1, 32, classify.OK), trial(2, 128, classify.OOM)}, 64, 0},
		{"one failure", []Trial{trial(1, 32, classify.OK), trial(2, 64, classify.OOM), trial(3, 128, classify.OOM)}, 64, 2},
		{"the last of two failures", []Trial{trial(1, 64, classify.OOM), trial(2, 32, classify.OK), trial(3, 64, classify.Crash), trial(4, 128, classify.OOM)}, 64, 3},
		{"a failure before a fit at the same size", []Trial{trial(1, 64, classify.OOM), trial(2, 64, classify.OK)}, 64, 1},
		{"a timeout is a failure", []Trial{trial(1, 64, classify.OK), trial(2, 64, classify.Timeout)}, 64, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Run{Trials: tt.trials}
			got := r.LastFailure(tt.size)
			switch {
			case tt.want == 0 && got != nil:
				t.Errorf("LastFailure(%d) = trial %d, want nil", tt.size, got.N)
			case tt.want != 0 && got == nil:
				t.Errorf("LastFailure(%d) = nil, want trial %d", tt.size, tt.want)
			case tt.want != 0 && got != &r.Trials[tt.want-1]:
				t.Errorf("LastFailure(%d) = trial %d (%+v), want trial %d of the run itself", tt.size, got.N, *got, tt.want)
			}
		})
	}
}

func TestSmallest(t *testing.T) {
	trial := func(size int) Trial { return Trial{Size: size, Outcome: classify.OOM} }
	for _, tc := range []struct {
		name string
		run  Run
		want int
	}{
		{"no trials: --min", Run{Settings: Settings{Min: 3}}, 3},
		{"--multiple-of 8 from --min 3 tried 8", Run{Settings: Settings{Min: 3, MultipleOf: 8}, Trials: []Trial{trial(64), trial(8), trial(16)}}, 8},
	} {
		if got := tc.run.Smallest(); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestRunWithoutTrialsHasAnEmptyList(t *testing.T) {
	b, err := json.Marshal(&Run{Status: Failed})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"trials":[]`) {
		t.Errorf("JSON %s: want an empty trials list", b)
	}
}

// TestRising: memory still rising is growth at the last step, judged after
// the batches meant to raise the peak (from: none for fixed shapes), and
// only where a step ran after them.
func TestRising(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name   string
		peaks  []uint64
		from   int
		want   uint64
		judged bool
	}{
		{"no peaks", nil, 0, 0, false},
		// The optimizer's state appears in step 1: step 2 is higher in
		// every ordinary run, and two steps cannot tell more.
		{"two steps, the second higher", []uint64{10 * gib, 10*gib + 359<<20}, 0, 0, false},
		{"settled after the first step", []uint64{10 * gib, 11 * gib, 11 * gib}, 0, 0, true},
		{"still rising at the third", []uint64{10 * gib, 11 * gib, 12 * gib}, 0, 1 * gib, true},
		{"falling", []uint64{10 * gib, 12 * gib, 11 * gib}, 0, 0, true},
		{"growth within the floor", []uint64{10 * gib, 10 * gib, 10*gib + RisingFloor}, 0, 0, true},
		{"growth within the share", []uint64{10 * gib, 10 * gib, 10*gib + 20<<20}, 0, 0, true},
		{"growth above both", []uint64{1 * gib, 1 * gib, 1*gib + 20<<20}, 0, 20 << 20, true},
		// The worst batch ran first and its peak stands: the smaller
		// batches after it must still not raise it.
		{"worst first, settled after it", []uint64{20 * gib, 20 * gib, 20 * gib}, 1, 0, true},
		{"worst first, rising past its peak", []uint64{20 * gib, 20 * gib, 21 * gib}, 1, 1 * gib, true},
		// Peaks of the steps after the worst alone (an adapter that reset
		// them): lower than the worst's, and still growing.
		{"worst first, rising below its peak", []uint64{20 * gib, 12 * gib, 13 * gib}, 1, 1 * gib, true},
		{"three worst batches, two steps after", []uint64{18 * gib, 19 * gib, 20 * gib, 20 * gib, 20 * gib}, 3, 0, true},
		// The last worst batch raised the peak: that is the batch, not
		// memory still rising.
		{"growth within the worst batches", []uint64{18 * gib, 19 * gib, 20 * gib, 20 * gib}, 3, 0, true},
		{"only worst batches ran", []uint64{18 * gib, 19 * gib, 20 * gib}, 3, 0, false},
		{"only the worst batch ran, and step 2 is the optimizer's", []uint64{20 * gib, 21 * gib}, 1, 0, false},
		{"extended: after the last growth", []uint64{10 * gib, 12 * gib, 14 * gib, 14 * gib, 15 * gib}, 3, 1 * gib, true},
		{"extended: ended at the last growth", []uint64{10 * gib, 12 * gib, 14 * gib}, 3, 0, false},
	}
	for _, tt := range tests {
		got, judged := RisingAfter(tt.peaks, tt.from)
		if got != tt.want || judged != tt.judged {
			t.Errorf("%s: RisingAfter(%v, %d) = %d, %v; want %d, %v", tt.name, tt.peaks, tt.from, got, judged, tt.want, tt.judged)
		}
		if tt.from == 0 && Rising(tt.peaks) != tt.want {
			t.Errorf("%s: Rising(%v) = %d, want %d", tt.name, tt.peaks, Rising(tt.peaks), tt.want)
		}
	}
}

func TestSettleFrom(t *testing.T) {
	tests := []struct {
		name string
		b    *adapter.Batches
		want int
	}{
		{"no batches", nil, 0},
		{"fixed shapes", &adapter.Batches{WorstFirst: true, WorstSteps: 3}, 0},
		{"worst first", &adapter.Batches{Varied: true, WorstFirst: true, WorstSteps: 3, GrewAtStep: 1}, 3},
		{"extended", &adapter.Batches{Varied: true, WhyNot: "iterable dataset", ExtendedSteps: 17, GrewAtStep: 9}, 9},
		{"off", &adapter.Batches{Varied: true, WhyNot: "off", GrewAtStep: 3}, 0},
	}
	for _, tt := range tests {
		if got := SettleFrom(tt.b); got != tt.want {
			t.Errorf("%s: SettleFrom = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestUnsettledAtAnswer(t *testing.T) {
	worst := &adapter.Batches{Varied: true, WorstFirst: true, WorstSteps: 3}
	r := &Run{Answer: 36, Trials: []Trial{
		{N: 1, Size: 36, Outcome: classify.OK, Steps: 3, Batches: worst},                      // only worst batches
		{N: 2, Size: 36, Outcome: classify.OK, Steps: 5, Batches: worst},                      // two steps after them
		{N: 3, Size: 36, Outcome: classify.OK, Steps: 3},                                      // fixed shapes
		{N: 4, Size: 36, Outcome: classify.OK, Batches: worst},                                // no steps reported
		{N: 5, Size: 37, Outcome: classify.OK, Steps: 3, Batches: worst},                      // not the answer
		{N: 6, Size: 36, Outcome: classify.OK, Steps: 3, Batches: worst, Phase: PhaseSoak},    // a soak
		{N: 7, Size: 36, Outcome: classify.OK, StepPeaks: []uint64{1, 2, 3}, Batches: worst},  // peaks only
		{N: 8, Size: 36, Outcome: classify.OOM, StepPeaks: []uint64{1, 2, 3}, Batches: worst}, // did not fit
	}}
	var got []int
	for _, t := range r.UnsettledAtAnswer() {
		got = append(got, t.N)
	}
	if !slices.Equal(got, []int{1, 7}) {
		t.Errorf("UnsettledAtAnswer = trials %v, want 1 and 7", got)
	}
}
