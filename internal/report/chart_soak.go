package report

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/units"
)

// chartSoakPoints bounds the points of one soak's curve: a soak reports up
// to 10000 steps, more than a chart's width can show, and each point costs
// the HTML report bytes.
const chartSoakPoints = 500

// chartSoakColors tell the soaks of one run apart (at most three, see
// runner.maxSoaks; more repeat the colours).
var chartSoakColors = []color.Color{chartBlue, chartOrange, chartPurple, chartGreen}

// WriteSoakChart draws the peak memory after every step of each --soak run
// against the step: a soak that ran out of memory ends in a red cross, and
// the legend says what each soak did to the answer. format is "svg" or
// "png"; width and height are in pixels.
func WriteSoakChart(w io.Writer, run *record.Run, format string, width, height int) error {
	if run == nil {
		return errors.New("draw soak chart: no run")
	}
	return chartWrite(w, chartSoak(run), format, width, height)
}

// chartSoak builds the soak chart.
func chartSoak(run *record.Run) chartFigure {
	xmax := 1.0
	lo, hi := math.Inf(1), 0.0
	for _, s := range run.Soaks {
		xmax = math.Max(xmax, float64(max(s.Steps, len(s.StepPeaks))))
		for _, b := range s.StepPeaks {
			lo, hi = math.Min(lo, float64(b)/chartGiB), math.Max(hi, float64(b)/chartGiB)
		}
	}
	title := "Peak memory by step during --soak"
	switch {
	case len(run.Soaks) == 0:
		title += "\nno soak was run"
	case math.IsInf(lo, 1):
		title += "\nno per-step peaks were reported (no CUDA, or no adapter)"
		lo = 0
	}
	p, legend := chartNew(title, "step", "peak memory (GiB)")
	xmax *= 1.04
	p.X.Min, p.X.Max = 0, xmax
	hi = chartSoakCapacity(p, &legend, run, xmax, hi)
	p.Y.Min, p.Y.Max = chartSoakRange(lo, hi)
	for i := range run.Soaks {
		chartSoakCurve(p, &legend, run, i)
	}
	return chartFigure{plot: p, legend: legend}
}

// chartSoakRange is the y axis for peaks from lo to hi GiB: close around
// them, because what a soak shows is growth of a few per cent on top of
// the answer's memory, but never so close that noise looks like growth.
func chartSoakRange(lo, hi float64) (float64, float64) {
	if hi <= 0 {
		return 0, 1
	}
	pad := math.Max((hi-lo)*0.15, hi*0.02)
	return math.Max(0, lo-pad), hi + pad/2
}

// chartSoakCapacity draws what a trial may use (the --memory-limit, else
// the card) when it is on the scale of the peaks, as the memory chart
// decides for the card, and returns the top of what the y axis must show.
func chartSoakCapacity(p *plot.Plot, legend *plot.Legend, run *record.Run, xmax, top float64) float64 {
	capacity := chartLinesOf(run).effective
	if capacity == 0 {
		return top
	}
	y := float64(capacity) / chartGiB
	if top > 0 && y > 2*top {
		legend.Add(fmt.Sprintf("capacity: %s (off scale)", units.Bytes(capacity)))
		return top
	}
	style := []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(chartLine(0, y, xmax, y, chartDark, vg.Points(1.5), style...))
	legend.Add(fmt.Sprintf("capacity: %s", units.Bytes(capacity)), chartLine(0, 0, 1, 1, chartDark, vg.Points(1.5), style...))
	return math.Max(top, y)
}

// chartSoakCurve draws soak i's peaks and, when it did not fit, a red cross
// where it ended; its legend entry says how it ended and what that did to
// the answer.
func chartSoakCurve(p *plot.Plot, legend *plot.Legend, run *record.Run, i int) {
	s := run.Soaks[i]
	label := fmt.Sprintf("batch %d: %s", s.Size, soakEnd(s))
	if effect := soakEffect(run, i); effect != "" {
		label += "\n" + effect
	}
	if len(s.StepPeaks) == 0 {
		legend.Add(label + "\n(no per-step peaks)")
		return
	}
	xys := chartDownsample(s.StepPeaks, chartSoakPoints)
	line := &plotter.Line{XYs: xys}
	line.LineStyle = draw.LineStyle{Color: chartSoakColors[i%len(chartSoakColors)], Width: vg.Points(1.75)}
	p.Add(line)
	if s.Outcome.Fits() {
		legend.Add(label, line)
		return
	}
	end := plotter.XYs{{X: float64(max(s.Steps, len(s.StepPeaks))), Y: xys[len(xys)-1].Y}}
	cross := chartPoints(end, chartCross{}, chartRed, vg.Points(5.5))
	p.Add(cross)
	legend.Add(label, line, cross)
}

// chartDownsample turns per-step peaks into at most limit points, each the
// largest peak of its run of steps at that run's last step: the curve
// keeps every rise a reader looks for.
func chartDownsample(peaks []uint64, limit int) plotter.XYs {
	n := len(peaks)
	buckets := min(n, limit)
	xys := make(plotter.XYs, 0, buckets)
	for b := range buckets {
		lo, hi := b*n/buckets, (b+1)*n/buckets
		top := uint64(0)
		for _, v := range peaks[lo:hi] {
			top = max(top, v)
		}
		xys = append(xys, plotter.XY{X: float64(hi), Y: float64(top) / chartGiB})
	}
	return xys
}
