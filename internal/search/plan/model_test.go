package plan

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// affine returns points of peak = fixed + per·size, each rounded up to the
// allocator's 2 MiB blocks, the way a real allocator reports them.
func affine(fixed, per uint64, sizes ...int) []Point {
	var ps []Point
	for _, s := range sizes {
		b := fixed + per*uint64(s)
		b = (b + Granularity - 1) / Granularity * Granularity
		ps = append(ps, Point{Size: s, Bytes: b})
	}
	return ps
}

func TestEstimateExactLine(t *testing.T) {
	f, err := Estimate([]Point{{10, 1000 + 10*7}, {20, 1000 + 20*7}, {40, 1000 + 40*7}})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(f.Intercept-1000) > 1e-6 || math.Abs(f.Slope-7) > 1e-9 || f.Residual > 1e-6 || f.N != 3 {
		t.Fatalf("fit = %+v, want intercept 1000, slope 7, residual 0, N 3", f)
	}
	if got := f.Predict(100); math.Abs(got-1700) > 1e-6 {
		t.Errorf("Predict(100) = %v, want 1700", got)
	}
	if got := f.MaxSize(1700); math.Abs(got-100) > 1e-9 {
		t.Errorf("MaxSize(1700) = %v, want 100", got)
	}
	if got := f.MaxSize(500); got >= 0 {
		t.Errorf("MaxSize below the intercept = %v, want negative", got)
	}
}

func TestEstimateErrors(t *testing.T) {
	tests := []struct {
		name   string
		points []Point
		want   error
	}{
		{"none", nil, errTooFewPoints},
		{"one", []Point{{8, 100}}, errTooFewPoints},
		{"one size twice", []Point{{8, 100}, {8, 104}}, errTooFewPoints},
		{"flat", []Point{{8, 100}, {16, 100}}, errNoSlope},
		{"falling", []Point{{8, 200}, {16, 100}}, errNoSlope},
		{"negative size", []Point{{-1, 100}, {16, 100}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Estimate(tt.points)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("error %q, want %q", err, tt.want)
			}
		})
	}
}

// TestBoundCoversTruth checks that the bound is honest: for affine
// workloads measured through 2 MiB allocator rounding, the true boundary
// always lies within Bound of MaxSize, however few or close the points.
func TestBoundCoversTruth(t *testing.T) {
	tests := []struct {
		name  string
		fixed uint64
		per   uint64
		sizes []int
	}{
		{"two close small points", 3000 * mib, 85 * mib, []int{8, 16}},
		{"two points, small slope", 1500 * mib, 3*mib + 123456, []int{8, 16}},
		{"Point near the boundary", 3000 * mib, 85 * mib, []int{8, 16, 250}},
		{"many points", 700 * mib, 11*mib + 777, []int{8, 16, 32, 64, 128, 256, 512, 1024}},
		{"large sizes", 20 << 30, 1 << 20, []int{1000, 3000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Estimate(affine(tt.fixed, tt.per, tt.sizes...))
			if err != nil {
				t.Fatal(err)
			}
			for _, capacity := range []uint64{16 << 30, 24 << 30, 80 << 30} {
				if capacity <= tt.fixed {
					continue
				}
				truth := float64(capacity-tt.fixed) / float64(tt.per)
				pred, bound := f.MaxSize(capacity), f.Bound(capacity)
				if math.Abs(pred-truth) > bound {
					t.Errorf("capacity %d GiB: predicted %.2f ± %.2f, true %.2f", capacity>>30, pred, bound, truth)
				}
			}
		})
	}
}

// TestBoundShrinksWithLeverage: a point near the boundary must tighten the
// bound a great deal compared with two points near zero; that is why the
// search refits after every near-boundary success.
func TestBoundShrinksWithLeverage(t *testing.T) {
	const capacity = 24 << 30
	near, err := Estimate(affine(3000*mib, 85*mib, 8, 16))
	if err != nil {
		t.Fatal(err)
	}
	far, err := Estimate(affine(3000*mib, 85*mib, 8, 16, 240))
	if err != nil {
		t.Fatal(err)
	}
	if bn, bf := near.Bound(capacity), far.Bound(capacity); !(bf < bn/4) {
		t.Fatalf("bound with a near-boundary Point %.2f, without %.2f: want at least 4× tighter", bf, bn)
	}
	if b := far.Bound(capacity); b > 1 {
		t.Errorf("bound with a near-boundary Point = %.2f samples, want ≤ 1", b)
	}
}

func TestFitString(t *testing.T) {
	f, err := Estimate(affine(3000*mib, 85*mib, 8, 16))
	if err != nil {
		t.Fatal(err)
	}
	if s := f.String(); !strings.Contains(s, "MiB × batch") || !strings.Contains(s, "2 points") {
		t.Errorf("String() = %q", s)
	}
}
