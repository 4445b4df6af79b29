package record

import (
	"math"
	"slices"
	"testing"
)

func TestMeasureThroughput(t *testing.T) {
	// Two slow warm-up steps, then 0.5 s a step with a stray 2 s one: the
	// median and the MAD ignore it.
	times := []float64{3, 1.2, 0.5, 0.49, 0.51, 0.5, 2, 0.5, 0.52, 0.48, 0.5, 0.5}
	sps, noise, n, ok := MeasureThroughput(100, times, 2)
	if !ok || n != 10 || sps != 200 {
		t.Fatalf("MeasureThroughput = %v samples/s, noise %v, %d intervals, %v; want 200 from 10", sps, noise, n, ok)
	}
	// MAD of the ten is 0.005 s: σ 0.0074, noise 1.2533·0.0074/√10/0.5.
	if want := 1.2533 * 1.4826 * 0.005 / math.Sqrt(10) / 0.5; math.Abs(noise-want) > 1e-9 {
		t.Errorf("noise %v, want %v", noise, want)
	}
	if _, _, _, ok := MeasureThroughput(100, times[:5], 2); ok {
		t.Error("3 step times measured a throughput")
	}
	if _, _, _, ok := MeasureThroughput(100, nil, 2); ok {
		t.Error("no step times measured a throughput")
	}
}

func TestRecommendSpeed(t *testing.T) {
	m := func(size int, sps, noise float64) SizeThroughput {
		return SizeThroughput{Size: size, SamplesPerSecond: sps, Noise: noise}
	}
	for _, tc := range []struct {
		name  string
		sizes []SizeThroughput
		want  int
		gain  float64
	}{
		{"the answer is fastest", []SizeThroughput{m(282, 1150, 0.002), m(211, 1100, 0.002)}, 282, 0},
		{"a smaller size is faster beyond the noise", []SizeThroughput{m(282, 1000, 0.005), m(211, 1100, 0.005)}, 211, 0.1},
		{"within the noise: no measurable gain", []SizeThroughput{m(282, 1000, 0.02), m(211, 1030, 0.02)}, 282, 0},
		{"the answer was not measured", []SizeThroughput{m(211, 1100, 0.001)}, 282, 0},
		{"a failed measurement is left out", []SizeThroughput{m(282, 1000, 0.001), m(211, 0, 0)}, 282, 0},
	} {
		got, gain := RecommendSpeed(282, tc.sizes)
		if got != tc.want || math.Abs(gain-tc.gain) > 1e-9 {
			t.Errorf("%s: RecommendSpeed = %d (gain %v), want %d (%v)", tc.name, got, gain, tc.want, tc.gain)
		}
	}
}

func TestThroughputSizes(t *testing.T) {
	for _, tc := range []struct {
		answer, lo, multiple int
		want                 []int
	}{
		{282, 1, 1, []int{211, 141, 70}},
		{282, 100, 8, []int{208, 136}},
		{3, 1, 1, []int{2, 1}},
		{1, 1, 1, nil},
	} {
		if got := ThroughputSizes(tc.answer, tc.lo, tc.multiple); !slices.Equal(got, tc.want) {
			t.Errorf("ThroughputSizes(%d, %d, %d) = %v, want %v", tc.answer, tc.lo, tc.multiple, got, tc.want)
		}
	}
}
