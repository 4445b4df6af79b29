package report

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/termtext"
	"github.com/batchfit/batchfit/internal/units"
)

// Default chart size in pixels, used by WritePlotFile and the HTML report.
const (
	ChartWidth  = 800
	ChartHeight = 500
)

// chartDPI makes one chart pixel one CSS pixel: gonum measures in points
// (1/72 in), browsers in px (1/96 in), so an 800 px chart is 600 pt wide in
// both the PNG and the SVG.
const chartDPI = 96

const chartGiB = 1 << 30

// Colours from the Okabe–Ito palette, which stays distinguishable for the
// common forms of colour blindness; failures are a plain red because the
// brief (and readers) expect "red cross = did not fit".
var (
	chartBlue   = color.RGBA{R: 0x00, G: 0x72, B: 0xb2, A: 0xff}
	chartOrange = color.RGBA{R: 0xe6, G: 0x9f, B: 0x00, A: 0xff}
	chartGreen  = color.RGBA{R: 0x00, G: 0x9e, B: 0x73, A: 0xff}
	chartPurple = color.RGBA{R: 0xcc, G: 0x79, B: 0xa7, A: 0xff}
	chartRed    = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	chartGrey   = color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
	chartDark   = color.RGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff}
	chartGrid   = color.RGBA{R: 0xdd, G: 0xdd, B: 0xdd, A: 0xff}
)

// chartFigure is a finished plot with its legend, which is drawn outside the
// data area (to the right) so that it never covers a marker or a line.
type chartFigure struct {
	plot   *plot.Plot
	legend plot.Legend
	// zoom, when set, is a small panel under the legend that shows a part
	// of the plot close up.
	zoom *plot.Plot
}

// WriteMemoryChart draws peak memory against batch size for the run's trials:
// measured peaks of the trials that fit, the trials that did not fit (at the
// capacity line, since their peak is unknown), the card's capacity, the
// --memory-limit, the fitted memory model and the answer. format is "svg" or
// "png"; width and height are in pixels.
func WriteMemoryChart(w io.Writer, run *record.Run, format string, width, height int) error {
	if run == nil {
		return errors.New("draw memory chart: no run")
	}
	return chartWrite(w, chartMemory(run), format, width, height)
}

// WriteThroughputChart draws training throughput (samples/s, from the median
// step time) against batch size for the trials that fit and timed their
// steps, with the recommended and the largest size marked. format is "svg"
// or "png"; width and height are in pixels.
func WriteThroughputChart(w io.Writer, run *record.Run, format string, width, height int) error {
	if run == nil {
		return errors.New("draw throughput chart: no run")
	}
	return chartWrite(w, chartThroughput(run), format, width, height)
}

// WritePlotFile writes the memory chart to path, as PNG or SVG by the file's
// extension, at ChartWidth × ChartHeight pixels.
func WritePlotFile(path string, run *record.Run) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	if format != "png" && format != "svg" {
		return fmt.Errorf("write chart %s: unknown format %q: use a .png or .svg file name", path, filepath.Ext(path))
	}
	if run == nil {
		return fmt.Errorf("write chart %s: no run", path)
	}
	// A chart on its own says what it is of, which the HTML report's page
	// says around it.
	fig := chartMemory(run)
	fig.plot.Title.Text += "\n" + plotCaption(run)
	// Draw before creating the file so a failure leaves no empty file behind.
	var buf bytes.Buffer
	if err := chartWrite(&buf, fig, format, ChartWidth, ChartHeight); err != nil {
		return fmt.Errorf("write chart %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

// plotCaption names a standalone chart's run: its command on one line, its
// GPU and date on the next, each short enough for the title's width.
func plotCaption(run *record.Run) string {
	const width = 60
	var lines, where []string
	if cmd := termtext.Line(htmlCommand(run.Command), width); cmd != "" {
		lines = append(lines, cmd)
	}
	if run.GPU != nil && len(run.GPU.Devices) > 0 {
		gpu := run.GPU.Devices[0].Name
		if l := run.Settings.MemoryLimit; l > 0 {
			gpu += ", limit " + units.Bytes(l)
		}
		where = append(where, gpu)
	}
	if !run.Started.IsZero() {
		where = append(where, run.Started.Local().Format("2006-01-02 15:04"))
	}
	if len(where) > 0 {
		lines = append(lines, termtext.Line(strings.Join(where, " · "), width))
	}
	return strings.Join(lines, "\n")
}

// chartWrite renders fig in format at width × height pixels.
func chartWrite(w io.Writer, fig chartFigure, format string, width, height int) (err error) {
	if format != "svg" && format != "png" {
		return fmt.Errorf("draw chart: unknown format %q (want svg or png)", format)
	}
	if width < 200 || height < 150 || width > 10000 || height > 10000 {
		return fmt.Errorf("draw chart: size %d×%d px is outside 200×150 to 10000×10000", width, height)
	}
	// gonum/plot panics on some degenerate input instead of returning an
	// error; a report must never take the program down.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("draw chart: %v", r)
		}
	}()
	wpt := vg.Length(width) * vg.Inch / chartDPI
	hpt := vg.Length(height) * vg.Inch / chartDPI
	var canvas vg.CanvasWriterTo
	if format == "svg" {
		canvas = vgsvg.New(wpt, hpt)
	} else {
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(wpt, hpt), vgimg.UseDPI(chartDPI))}
	}
	chartDraw(draw.New(canvas), fig)
	if _, err := canvas.WriteTo(w); err != nil {
		return fmt.Errorf("write %s chart: %w", format, err)
	}
	return nil
}

// chartDraw lays the figure out: a white page, the plot on the left and the
// legend in a column on the right.
func chartDraw(c draw.Canvas, fig chartFigure) {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	pad := vg.Points(8)
	inner := draw.Crop(c, pad, -pad, pad, -pad)
	legendWidth := fig.legend.Rectangle(inner).Size().X
	if legendWidth > 0 {
		gap := vg.Points(14)
		fig.plot.Draw(draw.Crop(inner, 0, -(legendWidth + gap), 0, 0))
		// Start the legend level with the top of the data area, below the title.
		top := vg.Length(0)
		if fig.plot.Title.Text != "" {
			top = fig.plot.Title.TextStyle.Rectangle(fig.plot.Title.Text).Size().Y + fig.plot.Title.Padding
		}
		column := draw.Crop(inner, inner.Size().X-legendWidth, 0, 0, -top)
		fig.legend.Draw(column)
		chartDrawZoom(column, fig)
		return
	}
	fig.plot.Draw(inner)
}

// chartDrawZoom draws the figure's zoomed panel in the legend's column,
// below the legend, when there is room for it.
func chartDrawZoom(column draw.Canvas, fig chartFigure) {
	if fig.zoom == nil {
		return
	}
	legendHeight := fig.legend.Rectangle(column).Size().Y
	gap := vg.Points(16)
	below := column.Size().Y - legendHeight - gap
	if below < vg.Points(110) {
		return
	}
	fig.zoom.Draw(draw.Crop(column, 0, 0, 0, -(legendHeight + gap)))
}

// chartNew returns a plot with the house style: grid, title, axis labels.
func chartNew(title, xlabel, ylabel string) (*plot.Plot, plot.Legend) {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(10)
	p.Title.TextStyle.Font = chartFont(13)
	p.Title.TextStyle.Color = chartDark
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = chartFont(11)
		a.Label.TextStyle.Color = chartDark
		a.Tick.Label.Font = chartFont(10)
		a.Tick.Label.Color = chartDark
		a.Tick.Marker = chartTicks{}
		a.Padding = vg.Points(2)
	}
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	grid := plotter.NewGrid()
	grid.Vertical = draw.LineStyle{Color: chartGrid, Width: vg.Points(0.75)}
	grid.Horizontal = grid.Vertical
	p.Add(grid)

	l := plot.NewLegend()
	l.Top = true
	l.Left = true
	l.TextStyle.Font = chartFont(10)
	l.TextStyle.Color = chartDark
	l.Padding = vg.Points(4)
	l.ThumbnailWidth = vg.Points(18)
	return p, l
}

// chartFont is the sans-serif face of the Liberation fonts gonum embeds, so
// a PNG looks the same everywhere; the HTML report gives the SVG's text a
// metric-compatible fallback list (Arial, Helvetica) by CSS.
func chartFont(size float64) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: vg.Points(size)}
}

// chartTicks labels about six round values (1, 2, 2.5 or 5 × 10^k) along an
// axis; gonum's default labels only two or three, which is too few to read a
// batch size or a memory figure off the chart.
type chartTicks struct{}

func (chartTicks) Ticks(lo, hi float64) []plot.Tick {
	return chartTicksStep(lo, hi, []float64{1, 2, 2.5, 5}, 0)
}

// chartSizeTicks are chartTicks for batch sizes: whole numbers only.
type chartSizeTicks struct{}

func (chartSizeTicks) Ticks(lo, hi float64) []plot.Tick {
	return chartTicksStep(lo, hi, []float64{1, 2, 5}, 1)
}

// chartTicksStep places about six labelled ticks from lo to hi at a step of
// a multiple times a power of ten (at least minStep), with an unlabelled
// tick halfway where that is at least minStep/2 too.
func chartTicksStep(lo, hi float64, multiples []float64, minStep float64) []plot.Tick {
	if !chartFinite(lo, hi) || hi <= lo {
		return nil
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range multiples {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	step = math.Max(step, minStep)
	var ticks []plot.Tick
	first := math.Ceil(lo/step) * step
	for i := 0; i < 100; i++ {
		v := first + float64(i)*step
		if v > hi+step*1e-9 {
			break
		}
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		// Unlabelled minor ticks halfway help to read values off the chart.
		if mid := v + step/2; mid <= hi && step/2 >= minStep {
			ticks = append(ticks, plot.Tick{Value: mid})
		}
	}
	return ticks
}

// chartPoints is a scatter of glyphs.
func chartPoints(xys plotter.XYs, shape draw.GlyphDrawer, clr color.Color, radius vg.Length) *plotter.Scatter {
	s := &plotter.Scatter{XYs: xys}
	s.GlyphStyle = draw.GlyphStyle{Color: clr, Shape: shape, Radius: radius}
	return s
}

// chartLine is a straight line between two points.
func chartLine(x0, y0, x1, y1 float64, clr color.Color, width vg.Length, dashes ...vg.Length) *plotter.Line {
	l := &plotter.Line{XYs: plotter.XYs{{X: x0, Y: y0}, {X: x1, Y: y1}}}
	l.LineStyle = draw.LineStyle{Color: clr, Width: width, Dashes: dashes}
	return l
}

// chartMemoryLines are the horizontal reference lines of the memory chart.
type chartMemoryLines struct {
	card      uint64 // the smallest card's total memory
	limit     uint64 // --memory-limit, 0 when not set
	effective uint64 // what a trial may use: the limit, else the card
}

func chartLinesOf(run *record.Run) chartMemoryLines {
	var m chartMemoryLines
	if run.GPU != nil {
		for _, d := range run.GPU.Devices {
			if d.Total > 0 && (m.card == 0 || d.Total < m.card) {
				m.card = d.Total
			}
		}
		m.effective = run.GPU.Capacity
	}
	m.limit = run.Settings.MemoryLimit
	if m.effective == 0 {
		m.effective = m.limit
	}
	if m.effective == 0 {
		m.effective = m.card
	}
	if m.card == 0 && m.limit == 0 {
		m.card = m.effective
	}
	return m
}

// memoryPoints are a run's trials as the memory chart draws them: the
// peaks of the trials that fit, and the sizes of the others.
type memoryPoints struct {
	alloc, device plotter.XYs
	failed        map[classify.Outcome]bool // the too-large outcomes seen
	// fails are the too-large trials at the memory they needed at least
	// (record.Trial.Needed), in GiB; NaN where that is unknown.
	fails  plotter.XYs
	others []int // crashed or canceled
	xmax   float64
}

func memoryPointsOf(run *record.Run) memoryPoints {
	m := memoryPoints{failed: map[classify.Outcome]bool{}}
	for _, t := range run.Trials {
		m.xmax = math.Max(m.xmax, float64(t.Size))
		switch {
		case t.Outcome.Fits():
			if t.Allocated > 0 {
				m.alloc = append(m.alloc, plotter.XY{X: float64(t.Size), Y: float64(t.Allocated) / chartGiB})
			}
			if t.Device > 0 {
				m.device = append(m.device, plotter.XY{X: float64(t.Size), Y: float64(t.Device) / chartGiB})
			}
		case t.Outcome.TooLarge():
			m.failed[t.Outcome] = true
			held := math.NaN()
			if b, more := t.Memory(allocatorOnly(run)); more {
				held = float64(b) / chartGiB
			}
			m.fails = append(m.fails, plotter.XY{X: float64(t.Size), Y: held})
		default:
			m.others = append(m.others, t.Size)
		}
	}
	if m.xmax <= 0 {
		m.xmax = 1
	}
	m.xmax *= 1.06
	return m
}

func (m memoryPoints) none() bool { return len(m.alloc) == 0 && len(m.device) == 0 }

// dataMax is the highest peak measured, in GiB.
func (m memoryPoints) dataMax() float64 {
	top := 0.0
	for _, xy := range slices.Concat(m.alloc, m.device) {
		top = math.Max(top, xy.Y)
	}
	return top
}

// memoryTitles returns the memory chart's title and y label.
func memoryTitles(run *record.Run, m memoryPoints) (title, ylabel string) {
	ylabel = "peak memory (GiB)"
	switch {
	case len(m.alloc) > 0 && len(m.device) == 0:
		ylabel = "peak allocated memory (GiB, PyTorch)"
	case len(m.alloc) == 0 && len(m.device) > 0:
		ylabel = "peak device memory (GiB, NVML)"
	}
	title = "Peak GPU memory by batch size"
	switch {
	case len(run.Trials) == 0:
		title += "\nno trials were run"
	case m.none():
		title += "\nno memory was measured (no NVML, no adapter)"
		ylabel = ""
	}
	return title, ylabel
}

// chartMemory builds the memory chart.
func chartMemory(run *record.Run) chartFigure {
	m := memoryPointsOf(run)
	title, ylabel := memoryTitles(run, m)
	p, legend := chartNew(title, "batch size", ylabel)
	p.X.Tick.Marker = chartSizeTicks{}
	p.X.Min, p.X.Max = 0, m.xmax
	if m.none() {
		// With nothing measured there is no memory scale: lay the trials out
		// along the x axis so the outcomes are still visible.
		p.Y.Min, p.Y.Max = 0, 1
		p.Y.Tick.Marker = plot.ConstantTicks(nil)
		p.Y.LineStyle.Width = 0
		chartOutcomeMarkers(p, &legend, run, 0.5, 0.5, m.failed, m.fails, m.others)
		chartAnswerLines(p, &legend, run, 0, 1)
		return chartFigure{plot: p, legend: legend}
	}
	lines := chartLinesOf(run)
	ymax := chartCapacityLines(p, &legend, lines, m)
	chartModelLine(p, &legend, run.Model, m.xmax)
	chartAnswerLines(p, &legend, run, 0, ymax)
	if len(m.device) > 0 {
		s := chartPoints(m.device, draw.PyramidGlyph{}, chartOrange, vg.Points(4))
		p.Add(s)
		legend.Add("peak device (NVML)", s)
	}
	if len(m.alloc) > 0 {
		s := chartPoints(m.alloc, draw.CircleGlyph{}, chartBlue, vg.Points(3.5))
		p.Add(s)
		legend.Add("peak allocated (PyTorch)", s)
	}
	failY := float64(lines.effective) / chartGiB
	if failY <= 0 {
		failY = m.dataMax() * 1.04
	}
	chartOutcomeMarkers(p, &legend, run, failY, 0, m.failed, m.fails, m.others)
	return chartFigure{plot: p, legend: legend, zoom: chartZoom(run, m, lines)}
}

// chartCapacityLines sets the y range and draws the card's and the memory
// limit's lines; it returns the top of the y range.
func chartCapacityLines(p *plot.Plot, legend *plot.Legend, lines chartMemoryLines, m memoryPoints) float64 {
	card := float64(lines.card) / chartGiB
	limit := float64(lines.limit) / chartGiB
	effective := float64(lines.effective) / chartGiB
	dataMax := m.dataMax()
	// A --memory-limit far below the card (24 GiB on a 141 GiB H200) would
	// squash every measurement into the bottom of the chart; name the card
	// in the legend instead of drawing its line.
	drawCard := card > 0 && (limit == 0 || card <= 2*math.Max(limit, dataMax))
	ymax := math.Max(dataMax, math.Max(limit, effective))
	if drawCard {
		ymax = math.Max(ymax, card)
	}
	if ymax <= 0 {
		ymax = 1
	}
	ymax *= 1.08
	p.Y.Min, p.Y.Max = 0, ymax

	if drawCard {
		p.Add(chartLine(0, card, m.xmax, card, chartDark, vg.Points(1.5)))
		legend.Add(fmt.Sprintf("card: %s", units.Bytes(lines.card)), chartLine(0, 0, 1, 1, chartDark, vg.Points(1.5)))
	} else if card > 0 {
		legend.Add(fmt.Sprintf("card: %s (off scale)", units.Bytes(lines.card)))
	}
	if limit > 0 && lines.limit != lines.card {
		p.Add(chartLine(0, limit, m.xmax, limit, chartPurple, vg.Points(1.5), vg.Points(6), vg.Points(3)))
		legend.Add(fmt.Sprintf("memory limit: %s", units.Bytes(lines.limit)), chartLine(0, 0, 1, 1, chartPurple, vg.Points(1.5), vg.Points(6), vg.Points(3)))
	}
	return ymax
}

// chartModelLine draws the fitted model as the search decided the boundary
// against it: the fitted figure plus the memory outside it that the
// capacity was taken to lose (record.Model.Outside), so that it meets the
// card's (or the limit's) line where the model put the boundary. Its colour
// says which figure was fitted.
func chartModelLine(p *plot.Plot, legend *plot.Legend, m *record.Model, xmax float64) {
	if m == nil || !chartFinite(m.Intercept, m.Slope, m.Outside) || m.Slope == 0 {
		return
	}
	clr := chartBlue
	if m.Figure == "device" {
		clr = chartOrange
	}
	base := m.Intercept + max(m.Outside, 0)
	f := plotter.NewFunction(func(x float64) float64 { return modelBytes(m, x) / chartGiB })
	f.XMin, f.XMax = 0, xmax
	f.Samples = 2
	f.LineStyle = draw.LineStyle{Color: clr, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
	p.Add(f)
	// The record's own text stays out of the chart so the HTML report can
	// inline it as is.
	label := fmt.Sprintf("model: %s + %s/sample", units.Bytes(uint64(max(base, 0))), units.Bytes(uint64(max(m.Slope, 0))))
	if m.Outside > 0 {
		label += fmt.Sprintf("\n(%s, with %s outside it)", m.Figure, units.Bytes(uint64(m.Outside)))
	}
	legend.Add(label, f)
}

// modelBytes is the model's whole memory at size n, as the boundary was
// decided against it: the fitted figure and the memory outside it.
func modelBytes(m *record.Model, n float64) float64 {
	return m.Intercept + max(m.Outside, 0) + m.Slope*n
}

// chartOutcomeMarkers draws the trials that did not fit, at the memory they
// needed at least (failY where that is unknown), and the ones that
// crashed or were canceled (at okY). When okY > 0 the trials that fit are
// drawn there too: the chart without memory figures has no other place
// for them.
func chartOutcomeMarkers(p *plot.Plot, legend *plot.Legend, run *record.Run, failY, okY float64, failed map[classify.Outcome]bool, fails plotter.XYs, others []int) {
	if okY > 0 {
		var oks plotter.XYs
		for _, t := range run.Trials {
			if t.Outcome.Fits() {
				oks = append(oks, plotter.XY{X: float64(t.Size), Y: okY})
			}
		}
		if len(oks) > 0 {
			s := chartPoints(oks, draw.CircleGlyph{}, chartGreen, vg.Points(4))
			p.Add(s)
			legend.Add("fits (ok)", s)
		}
	}
	if len(fails) > 0 {
		xys, held := make(plotter.XYs, len(fails)), false
		for i, f := range fails {
			xys[i] = f
			if math.IsNaN(f.Y) || okY > 0 {
				xys[i].Y = failY
			} else {
				held = true
			}
		}
		s := chartPoints(xys, chartCross{}, chartRed, vg.Points(5.5))
		p.Add(s)
		var kinds []string
		for _, o := range []classify.Outcome{classify.OOM, classify.HostOOM, classify.SizeLimit, classify.Timeout} {
			if failed[o] {
				kinds = append(kinds, string(o))
			}
		}
		label := "too large: " + strings.Join(kinds, ", ")
		if held {
			label += " (needs more than shown)"
		}
		legend.Add(label, s)
	}
	if len(others) > 0 {
		var xys plotter.XYs
		for _, n := range others {
			xys = append(xys, plotter.XY{X: float64(n), Y: okY})
		}
		s := chartPoints(xys, draw.RingGlyph{}, chartGrey, vg.Points(4))
		p.Add(s)
		legend.Add("crash / canceled", s)
	}
}

// chartAnswerLines marks the answer, and the --margin answer when there is
// one, with vertical lines from y0 to y1.
func chartAnswerLines(p *plot.Plot, legend *plot.Legend, run *record.Run, y0, y1 float64) {
	if run.Margin > 0 && run.Margin != run.Answer {
		l := chartLine(float64(run.Margin), y0, float64(run.Margin), y1, chartGreen, vg.Points(1), vg.Points(1.5), vg.Points(2.5))
		p.Add(l)
		legend.Add(fmt.Sprintf("margin size: %d", run.Margin), l)
	}
	if run.Answer > 0 {
		l := chartLine(float64(run.Answer), y0, float64(run.Answer), y1, chartGreen, vg.Points(2))
		p.Add(l)
		legend.Add(fmt.Sprintf("answer: %d", run.Answer), l)
	}
}

// chartThroughput builds the throughput chart.
func chartThroughput(run *record.Run) chartFigure {
	var pts plotter.XYs
	bySize := map[int][]float64{}
	xmax := 0.0
	for _, t := range run.Trials {
		xmax = math.Max(xmax, float64(t.Size))
		if v := t.Throughput(); v > 0 && chartFinite(v) {
			pts = append(pts, plotter.XY{X: float64(t.Size), Y: v})
			bySize[t.Size] = append(bySize[t.Size], v)
		}
	}
	title := "Training throughput by batch size"
	if len(pts) == 0 {
		title += "\nno step times were recorded"
	}
	p, legend := chartNew(title, "batch size", "samples / s (median step)")
	if xmax <= 0 {
		xmax = 1
	}
	xmax *= 1.06
	ymax := 0.0
	for _, xy := range pts {
		ymax = math.Max(ymax, xy.Y)
	}
	if ymax <= 0 {
		ymax = 1
	}
	ymax *= 1.12
	p.X.Min, p.X.Max = 0, xmax
	p.Y.Min, p.Y.Max = 0, ymax

	if run.Answer > 0 {
		l := chartLine(float64(run.Answer), 0, float64(run.Answer), ymax, chartGreen, vg.Points(2))
		p.Add(l)
		legend.Add(fmt.Sprintf("largest size: %d", run.Answer), l)
	}
	if run.Recommended > 0 {
		l := chartLine(float64(run.Recommended), 0, float64(run.Recommended), ymax, chartOrange, vg.Points(2), vg.Points(6), vg.Points(3))
		p.Add(l)
		legend.Add(fmt.Sprintf("recommended: %d", run.Recommended), l)
	}
	if len(pts) > 0 {
		// Repeated sizes (retries, --confirm) are joined through their mean.
		sizes := make([]int, 0, len(bySize))
		for n := range bySize {
			sizes = append(sizes, n)
		}
		slices.Sort(sizes)
		var mean plotter.XYs
		for _, n := range sizes {
			vs := bySize[n]
			sum := 0.0
			for _, v := range vs {
				sum += v
			}
			mean = append(mean, plotter.XY{X: float64(n), Y: sum / float64(len(vs))})
		}
		line := &plotter.Line{XYs: mean}
		line.LineStyle = draw.LineStyle{Color: chartBlue, Width: vg.Points(1.5)}
		s := chartPoints(pts, draw.CircleGlyph{}, chartBlue, vg.Points(3.5))
		p.Add(line, s)
		legend.Add("trials that fit", line, s)
	}
	return chartFigure{plot: p, legend: legend}
}

// chartCross is a bold ×: gonum's CrossGlyph is a hairline that is hard to
// see at a glance, and failures are what a reader looks for.
type chartCross struct{}

func (chartCross) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(2)})
	r := sty.Radius * math.Sqrt2 / 2
	var p vg.Path
	p.Move(vg.Point{X: pt.X - r, Y: pt.Y - r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y + r})
	p.Move(vg.Point{X: pt.X - r, Y: pt.Y + r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y - r})
	c.Stroke(p)
}

func chartFinite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}
