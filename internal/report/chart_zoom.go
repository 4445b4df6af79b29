package report

import (
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/batchfit/batchfit/internal/record"
)

// zoomFactor is how much narrower than the whole chart the boundary's
// neighbourhood must be for the memory chart to get a zoomed panel: a search
// from 8 to 953 whose last trials sit between 856 and 953 puts the answer and
// its first failure a pixel apart.
const zoomFactor = 5

// zoomRange returns the batch sizes the zoomed panel shows: the answer and
// its first failure with room on either side, the trials near them
// included. ok is false when the whole chart shows them well enough.
func zoomRange(run *record.Run, xmax float64) (x0, x1 float64, ok bool) {
	if run.Answer <= 0 {
		return 0, 0, false
	}
	a := float64(run.Answer)
	f := a + 1
	if run.FirstFailure > 0 {
		f = float64(run.FirstFailure)
	}
	pad := math.Max(math.Max(3, 3*(f-a)), 0.02*a)
	x0, x1 = math.Max(a-pad, 0), f+pad
	if xmax/(x1-x0) < zoomFactor {
		return 0, 0, false
	}
	return x0, x1, true
}

// chartZoom builds the panel that shows the boundary's neighbourhood of the
// memory chart: the same measurements, capacity lines, model and answer,
// over the sizes of zoomRange and the peaks measured there. nil when the
// whole chart is enough.
func chartZoom(run *record.Run, m memoryPoints, lines chartMemoryLines) *plot.Plot {
	x0, x1, ok := zoomRange(run, m.xmax)
	if !ok {
		return nil
	}
	in := func(xys plotter.XYs) plotter.XYs {
		var out plotter.XYs
		for _, xy := range xys {
			if xy.X >= x0 && xy.X <= x1 {
				out = append(out, xy)
			}
		}
		return out
	}
	alloc, device, fails := in(m.alloc), in(m.device), in(m.fails)
	effective := float64(lines.effective) / chartGiB
	y0, y1 := math.Inf(1), math.Inf(-1)
	for _, xy := range slices.Concat(alloc, device, fails) {
		if !math.IsNaN(xy.Y) {
			y0, y1 = math.Min(y0, xy.Y), math.Max(y1, xy.Y)
		}
	}
	if effective > 0 {
		y0, y1 = math.Min(y0, effective), math.Max(y1, effective)
	}
	if math.IsInf(y0, 0) {
		return nil // nothing measured near the boundary
	}
	span := math.Max(y1-y0, 0.05*math.Max(y1, 1))
	y0, y1 = math.Max(y0-0.25*span, 0), y1+0.25*span

	p, legend := chartNew("near the boundary", "", "")
	p.Title.TextStyle.Font = chartFont(10)
	p.Title.Padding = vg.Points(4)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Tick.Label.Font = chartFont(8)
	}
	p.X.Tick.Marker = chartSizeTicks{}
	switch {
	case effective <= 0:
	case lines.limit > 0 && lines.limit != lines.card:
		p.Add(chartLine(x0, effective, x1, effective, chartPurple, vg.Points(1.5), vg.Points(6), vg.Points(3)))
	default:
		p.Add(chartLine(x0, effective, x1, effective, chartDark, vg.Points(1.5)))
	}
	chartModelLine(p, &legend, run.Model, x1)
	chartAnswerLines(p, &legend, run, y0, y1)
	if len(device) > 0 {
		p.Add(chartPoints(device, draw.PyramidGlyph{}, chartOrange, vg.Points(4)))
	}
	if len(alloc) > 0 {
		p.Add(chartPoints(alloc, draw.CircleGlyph{}, chartBlue, vg.Points(3.5)))
	}
	others := slices.DeleteFunc(slices.Clone(m.others), func(n int) bool { return float64(n) < x0 || float64(n) > x1 })
	failY := effective
	if failY <= 0 {
		failY = y1 - 0.1*(y1-y0)
	}
	chartOutcomeMarkers(p, &legend, run, failY, 0, m.failed, fails, others)
	// Last: adding a line or points widens the axes to hold them, and lines
	// outside the panel (a --margin line far below) are clipped.
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = x0, x1, y0, y1
	return p
}
