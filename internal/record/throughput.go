package record

import (
	"math"
	"slices"
)

// Throughput is what --throughput measured: samples per second at the
// answer and at a few sizes below it chosen for the purpose, each in a
// fresh trial of Steps steps whose first Warmup step intervals are left
// out (cuDNN's autotuning, the allocator's first growth, lazy loading).
type Throughput struct {
	Steps  int              `json:"steps"`
	Warmup int              `json:"warmup_intervals"`
	Sizes  []SizeThroughput `json:"sizes"`
	// Recommended is the size to train at for speed: the answer, unless a
	// smaller size was faster by more than the measured noise.
	Recommended int `json:"recommended"`
	// Gain is Recommended's samples/s over the answer's, less one (0.06 is
	// 6 % faster); 0 when Recommended is the answer.
	Gain float64 `json:"gain"`
}

// SizeThroughput is one size's measurement.
type SizeThroughput struct {
	Size  int `json:"batch_size"`
	Trial int `json:"trial"` // the trial that measured it
	// SamplesPerSecond is Size over the median step time of the measured
	// steps; 0 when the trial did not run or reported too few steps.
	SamplesPerSecond float64 `json:"samples_per_second"`
	// Noise is the relative standard error of SamplesPerSecond (0.004 is
	// ±0.4 %), from the spread of the step times.
	Noise float64 `json:"noise"`
	// Intervals is how many step times were measured.
	Intervals int `json:"intervals"`
}

// MinThroughputIntervals is the fewest step times a measurement needs.
const MinThroughputIntervals = 4

// MeasureThroughput is samples/s at size from a trial's step times, less the
// first warmup ones, with its noise: the relative standard error of the
// median, 1.2533·σ/√n with σ estimated robustly as 1.4826 times the median
// absolute deviation (a stray slow step, a log flush, does not inflate
// it). ok is false with fewer than MinThroughputIntervals step times left.
func MeasureThroughput(size int, stepTimes []float64, warmup int) (samplesPerSecond, noise float64, n int, ok bool) {
	if warmup >= len(stepTimes) {
		return 0, 0, 0, false
	}
	times := slices.Clone(stepTimes[warmup:])
	n = len(times)
	med := median(times)
	if n < MinThroughputIntervals || med <= 0 {
		return 0, 0, n, false
	}
	dev := make([]float64, n)
	for i, t := range times {
		dev[i] = math.Abs(t - med)
	}
	sigma := 1.4826 * median(dev)
	return float64(size) / med, 1.2533 * sigma / math.Sqrt(float64(n)) / med, n, true
}

// RecommendSpeed picks the size to train at for speed among the measured
// ones: the fastest, if it is faster than the answer's by more than twice
// their combined noise (about 95 % confidence that the gain is real), else
// the answer. gain is the fastest's samples/s over the answer's, less one.
func RecommendSpeed(answer int, sizes []SizeThroughput) (recommended int, gain float64) {
	var at, best *SizeThroughput
	for i := range sizes {
		s := &sizes[i]
		if s.SamplesPerSecond <= 0 {
			continue
		}
		if s.Size == answer {
			at = s
		}
		if best == nil || s.SamplesPerSecond > best.SamplesPerSecond {
			best = s
		}
	}
	if at == nil || best == nil || best == at {
		return answer, 0
	}
	diff := best.SamplesPerSecond - at.SamplesPerSecond
	noise := math.Hypot(best.SamplesPerSecond*best.Noise, at.SamplesPerSecond*at.Noise)
	if diff <= 2*noise {
		return answer, 0
	}
	return best.Size, diff / at.SamplesPerSecond
}

// ThroughputSizes are the sizes --throughput measures below answer: about
// three quarters, a half and a quarter of it, on the grid of multipleOf
// and not below lo, largest first, each once.
func ThroughputSizes(answer, lo, multipleOf int) []int {
	multipleOf = max(multipleOf, 1)
	var out []int
	for _, f := range []float64{0.75, 0.5, 0.25} {
		s := int(float64(answer)*f) / multipleOf * multipleOf
		if s >= max(lo, 1) && s < answer && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
