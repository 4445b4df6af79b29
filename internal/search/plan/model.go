package plan

import (
	"errors"
	"fmt"
	"math"
)

// Granularity is the smallest error a measured peak is assumed to carry:
// allocators hand out memory in blocks (PyTorch's caching allocator rounds
// large segments to 2 MiB, and NVML reports whole pages), so two runs that
// need the same bytes can read up to one block apart.
const Granularity = 2 << 20

// Point is one measured peak: Bytes of memory at batch size Size.
type Point struct {
	Size  int
	Bytes uint64
}

// The errors estimate returns when the points cannot define a model.
var (
	errTooFewPoints = errors.New("need measured peaks at two or more distinct batch sizes")
	errNoSlope      = errors.New("peak memory does not grow with batch size")
)

// Fit is an affine model of peak memory against batch size, from which the
// largest batch size that fits in a given amount of memory is predicted with
// an honest error bound: peak = Intercept + Slope·size. The intercept is what
// does not scale with the batch (weights, gradients, optimizer state,
// workspaces); the slope is what one more sample costs (activations,
// inputs). This is what training peaks look like for fixed-shape inputs
// (DESIGN.md, "Memory", has how well it predicts).
type Fit struct {
	Intercept float64 // bytes at batch size 0
	Slope     float64 // bytes per sample
	// Residual is the largest absolute difference, in bytes, between a
	// measured peak and the fitted line.
	Residual float64
	N        int // points fitted

	sizes []float64 // the fitted sizes, for the error bound
	mean  float64   // their mean
	sxx   float64   // sum of squared deviations from the mean
}

// estimate fits the points by least squares. It needs two or more distinct
// sizes, and the fitted slope must be positive: a model in which a larger
// batch costs nothing cannot place a boundary.
func Estimate(points []Point) (Fit, error) {
	if len(points) == 0 {
		return Fit{}, errTooFewPoints
	}
	var sx, sy float64
	for _, p := range points {
		if p.Size < 0 {
			return Fit{}, fmt.Errorf("Point at batch size %d: size is negative", p.Size)
		}
		sx += float64(p.Size)
		sy += float64(p.Bytes)
	}
	n := float64(len(points))
	mx, my := sx/n, sy/n
	// Centred sums keep the arithmetic exact enough with peaks of 1e11 bytes.
	var sxx, sxy float64
	for _, p := range points {
		dx := float64(p.Size) - mx
		sxx += dx * dx
		sxy += dx * (float64(p.Bytes) - my)
	}
	if sxx == 0 {
		return Fit{}, errTooFewPoints
	}
	slope := sxy / sxx
	if !(slope > 0) {
		return Fit{}, fmt.Errorf("slope %.0f bytes per sample: %w", slope, errNoSlope)
	}
	f := Fit{
		Intercept: my - slope*mx,
		Slope:     slope,
		N:         len(points),
		sizes:     make([]float64, len(points)),
		mean:      mx,
		sxx:       sxx,
	}
	for i, p := range points {
		f.sizes[i] = float64(p.Size)
		f.Residual = math.Max(f.Residual, math.Abs(float64(p.Bytes)-f.Predict(p.Size)))
	}
	return f, nil
}

// Predict returns the predicted peak in bytes at a batch size.
func (f Fit) Predict(size int) float64 {
	return f.Intercept + f.Slope*float64(size)
}

// MaxSize returns the largest real batch size whose predicted peak is at
// most capacity bytes. It is below zero when even the intercept does not fit.
func (f Fit) MaxSize(capacity uint64) float64 {
	if f.Slope <= 0 {
		return math.NaN()
	}
	return (float64(capacity) - f.Intercept) / f.Slope
}

// Bound returns how many samples MaxSize(capacity) can be off, if every
// measured peak is off the true line by at most Residual+Granularity bytes.
//
// The bound is the worst case over such errors: a least-squares prediction
// at size x is a weighted sum of the measured peaks, and the weights' absolute
// sum says how much measurement error reaches the prediction. Extrapolating
// far beyond the fitted sizes multiplies it, so two close points near zero
// give a wide bound, and a point near the boundary makes it narrow.
func (f Fit) Bound(capacity uint64) float64 {
	if f.Slope <= 0 || f.sxx == 0 {
		return math.Inf(1)
	}
	x := f.MaxSize(capacity)
	n := float64(len(f.sizes))
	var w float64
	for _, xi := range f.sizes {
		w += math.Abs(1/n + (x-f.mean)*(xi-f.mean)/f.sxx)
	}
	return (f.Residual + Granularity) * w / f.Slope
}

// String describes the fit in MiB, for logs and reports.
func (f Fit) String() string {
	const mib = 1 << 20
	return fmt.Sprintf("peak ≈ %.0f MiB + %.2f MiB × batch (%d points, residual %.1f MiB)",
		f.Intercept/mib, f.Slope/mib, f.N, f.Residual/mib)
}
