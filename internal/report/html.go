package report

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"strings"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/termtext"
	"github.com/batchfit/batchfit/internal/units"
)

// WriteHTML writes the run as one self-contained HTML page: the answer, the
// run's facts, the memory and throughput charts (inline SVG) and every
// trial. It loads nothing from the network and runs no script, so it can be
// mailed or archived and opened anywhere. All text from the record (the
// user's command, error messages, paths) is escaped by html/template.
func WriteHTML(w io.Writer, run *record.Run) error {
	return writeHTML(w, run, "report")
}

// WriteHTMLFragment writes the report as a fragment to embed in another
// page (a notebook's output): one root element, <div class="batchfit-report">,
// whose styles all apply under it and nowhere else, with no script. It is
// the body of the page WriteHTML writes, byte for byte, so that a reader of
// that page (the Python API's Result._repr_html_) takes its body.
func WriteHTMLFragment(w io.Writer, run *record.Run) error {
	return writeHTML(w, run, "fragment")
}

// writeHTML writes the run with the named template: the page or its
// fragment.
func writeHTML(w io.Writer, run *record.Run, name string) error {
	if run == nil {
		return errors.New("write html report: no run")
	}
	var buf bytes.Buffer
	if err := htmlPage.ExecuteTemplate(&buf, name, htmlViewOf(run)); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	// The page holds text batchfit did not write (a trial's output, the
	// command, names from the driver). HTML escaping leaves its control
	// characters and escape sequences in place; they go as on a terminal
	// (termtext), in one pass over the whole page, which has none of its
	// own.
	if _, err := io.WriteString(w, termtext.Clean(buf.String())); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

// htmlView is the page's data, formatted: the template only lays it out.
// Nothing in it comes from the clock, so one run always gives the same page.
type htmlView struct {
	Title       string
	Command     string
	StatusText  string
	StatusClass string
	Headline    string
	Answer      string
	Proof       string
	Details     []string
	Alerts      []htmlAlert
	Facts       []htmlFact
	Model       string
	Charts      []htmlChart
	Soak        *htmlSoakView // nil when no soak ran
	Trials      []htmlTrial
	Tails       []htmlTail
	Version     string
}

type htmlAlert struct {
	Class string // "bad" or "warn"
	Title string
	Text  string
}

type htmlFact struct {
	Name  string
	Value string
	Mono  bool // a path or an identifier, shown in monospace
	Wide  bool // long enough to need the whole row
}

type htmlChart struct {
	SVG   template.HTML // produced by gonum from numbers and fixed labels only
	Error string
}

type htmlTrial struct {
	N          int
	Size       int
	Outcome    string
	Class      string
	Exit       string
	Reason     string
	Seconds    string
	Allocated  string
	Reserved   string
	Device     string
	Throughput string
	Phase      string
	Logs       []string
	Answer     bool
}

type htmlTail struct {
	Title string
	Text  string
}

func htmlViewOf(run *record.Run) htmlView {
	v := htmlView{
		Command: htmlCommand(run.Command),
		Version: run.Version,
	}
	v.Title = "batchfit report"
	if v.Command != "" {
		v.Title = "batchfit: " + v.Command
	}
	htmlHeadline(&v, run)

	if len(run.Flaky) > 0 {
		v.Alerts = append(v.Alerts, htmlAlert{Class: "warn", Title: "Flaky boundary",
			Text: fmt.Sprintf("Not exact: the boundary does not reproduce (%s). %d is the safe side: it ran every time it was tried.", run.FlakyText(), run.Answer)})
	}
	if run.AtRisk != nil {
		v.Alerts = append(v.Alerts, htmlAlert{Class: "warn", Title: "At risk",
			Text: fmt.Sprintf("Not exact: %s (see the warning below). %d is the safe side: it ran every time it was tried.", run.AtRiskText(), run.Answer)})
	}
	for _, p := range run.NonMonotonic {
		v.Alerts = append(v.Alerts, htmlAlert{Class: "warn", Title: "Non-monotonic",
			Text: fmt.Sprintf("Batch size %d failed below %d, which ran, and both held when retried in a fresh process: the program is not monotone here. The answer is the boundary above, proven as any other; a size below it may fail.", p.Fail, p.OK)})
	}
	for _, msg := range run.Warnings {
		v.Alerts = append(v.Alerts, htmlAlert{Class: "warn", Title: "Warning", Text: msg})
	}
	if run.Error != "" {
		v.Alerts = append(v.Alerts, htmlAlert{Class: "bad", Title: "Error", Text: run.Error})
	}

	v.Facts = htmlFacts(run)
	if m := run.Model; m != nil {
		v.Model = fmt.Sprintf("peak %s ≈ %s + %s × batch size (largest residual %s)",
			htmlOr(m.Figure, "memory"), units.Bytes(uint64(max(m.Intercept, 0))), units.Bytes(uint64(max(m.Slope, 0))), units.Bytes(uint64(max(m.Residual, 0))))
		if m.Outside > 0 {
			v.Model += fmt.Sprintf("; the boundary was decided with %s outside it (the CUDA context), as the chart draws it", units.Bytes(uint64(m.Outside)))
		}
	}

	v.Charts = append(v.Charts, htmlChartOf(run, WriteMemoryChart, "Peak GPU memory by batch size"))
	for _, t := range run.Trials {
		if t.Throughput() > 0 {
			v.Charts = append(v.Charts, htmlChartOf(run, WriteThroughputChart, "Training throughput by batch size"))
			break
		}
	}

	v.Soak = htmlSoakOf(run)
	for _, t := range run.Trials {
		v.Trials = append(v.Trials, htmlTrialOf(run, t))
		if t.Tail != "" {
			v.Tails = append(v.Tails, htmlTail{
				Title: fmt.Sprintf("trial %d, batch size %d: %s", t.N, t.Size, t.Outcome),
				Text:  t.Tail,
			})
		}
	}
	return v
}

// htmlHeadline fills the answer box: the number, what proves it, and the
// other sizes worth knowing.
func htmlHeadline(v *htmlView, run *record.Run) {
	v.StatusText = htmlOr(string(run.Status), "unknown")
	v.Answer = "—"
	if run.Answer > 0 {
		v.Answer = fmt.Sprint(run.Answer)
	}
	switch run.Status {
	case record.Found:
		v.StatusClass = "ok"
		v.Headline = "Largest batch size that runs"
		switch {
		case run.FirstFailure > 0:
			v.Proof = fmt.Sprintf("%d ran ok; %d %s.", run.Answer, run.FirstFailure, htmlFailureOf(run, run.FirstFailure))
		case run.Answer > 0 && run.Answer == run.Settings.Max:
			v.Proof = fmt.Sprintf("%d ran ok and is the --max bound.", run.Answer)
		}
	case record.NothingFits:
		v.StatusClass = "bad"
		v.StatusText = "nothing fits"
		v.Headline = "No batch size fits"
		v.Proof = fmt.Sprintf("Even batch size %d does not run.", run.Smallest())
	case record.Failed:
		v.StatusClass = "bad"
		v.Headline = "The search failed"
		if run.Answer > 0 {
			v.Headline = "The search failed; largest size seen to run"
		}
	case record.Interrupted:
		v.StatusClass = "warn"
		v.Headline = "The search was interrupted; largest size seen to run"
	default:
		// A run stored as "running" whose process is gone: show what it had.
		v.StatusClass = "warn"
		v.Headline = "The search did not finish; largest size seen to run"
	}
	if run.Cached {
		v.Details = append(v.Details, "Answered from the history, without running trials again.")
	}
	if run.Status == record.Found {
		text := MarginText(run.ShownMargin())
		v.Details = append(v.Details, strings.ToUpper(text[:1])+text[1:]+".")
	}
	if tp := run.Throughput; tp != nil {
		v.Details = append(v.Details, strings.Split(strings.TrimSpace(ThroughputText(run.Answer, tp)), "\n")...)
	}
}

// htmlFailureOf says how the trial at size failed, the last time it ran.
func htmlFailureOf(run *record.Run, size int) string {
	if t := run.LastFailure(size); t != nil {
		return fmt.Sprintf("does not (%s)", t.Outcome)
	}
	return "does not"
}

// htmlFacts are the page's table of facts about the run: where, on what,
// with which settings, when, and how it went. Empty values are left out.
func htmlFacts(run *record.Run) []htmlFact {
	var f factList
	// The command heads the page; here it would only repeat.
	f.add("Directory", run.Dir, true)
	f.gpus(run)
	f.settings(run.Settings)
	f.add("PyTorch", run.Torch, false)
	f.add("batchfit", run.Version, false)
	if !run.Started.IsZero() {
		f.add("Started", run.Started.Format("2006-01-02 15:04:05 MST"), false)
	}
	if run.Seconds > 0 || !run.Finished.IsZero() {
		d := run.Seconds
		if d == 0 {
			d = run.Finished.Sub(run.Started).Seconds()
		}
		f.add("Duration", units.ProseDuration(d), false)
	}
	f.add("Status", string(run.Status), false)
	if run.Rounds > 0 {
		f.add("Rounds", RoundsText(run), false)
	}
	f.add("Trials", TrialsText(run), false)
	if in := run.InputShapes; in != nil {
		order := "the largest batches first"
		switch {
		case in.WhyNot == record.WorstCaseOff:
			order = "in the program's order (--worst-case off)"
		case !in.WorstFirst:
			order = "in the program's order (" + in.WhyNot + ")"
		}
		f.add("Input shapes", htmlOr(in.Seen(), "varied")+"; trials ran "+order, true)
	}
	f.add("Run", run.ID, true)
	f.add("Logs", run.LogDir, true)
	return f
}

// factList builds htmlFacts.
type factList []htmlFact

func (f *factList) add(name, value string, mono bool) {
	if value != "" {
		*f = append(*f, htmlFact{Name: name, Value: value, Mono: mono, Wide: len(value) > 44})
	}
}

// gpus adds a line per GPU (name, memory, driver, CUDA) and the capacity a
// trial had.
func (f *factList) gpus(run *record.Run) {
	if run.GPU == nil {
		return
	}
	for i, d := range run.GPU.Devices {
		name := "GPU"
		if len(run.GPU.Devices) > 1 {
			name = fmt.Sprintf("GPU %d", i)
		}
		parts := []string{htmlOr(d.Name, "unknown GPU")}
		if d.Total > 0 {
			parts = append(parts, units.Bytes(d.Total))
		}
		if d.Driver != "" {
			parts = append(parts, "driver "+d.Driver)
		}
		if d.CUDA != "" {
			parts = append(parts, "CUDA "+d.CUDA)
		}
		if run.Simulated {
			parts = append(parts, "simulated")
		}
		f.add(name, strings.Join(parts, " · "), false)
	}
	if run.GPU.Capacity > 0 {
		f.add("Capacity per trial", units.Bytes(run.GPU.Capacity), false)
	}
}

// settings adds the search's settings that were set.
func (f *factList) settings(s record.Settings) {
	if s.MemoryLimit > 0 {
		f.add("Memory limit", LimitText(s)+" (--memory-limit)", false)
	}
	if s.Max > 0 {
		r := fmt.Sprintf("%d – %d", s.Min, s.Max)
		if s.MultipleOf > 1 {
			r += fmt.Sprintf(", multiples of %d", s.MultipleOf)
		}
		if s.Start > 0 {
			r += fmt.Sprintf(", starting at %d", s.Start)
		}
		f.add("Batch sizes", r, false)
	}
	if s.Steps > 0 {
		f.add("Steps per trial", fmt.Sprint(s.Steps), false)
	}
	f.add("Strategy", s.Strategy, false)
	if s.TimeoutSecs > 0 {
		f.add("Trial timeout", units.ProseDuration(s.TimeoutSecs), false)
	}
	if s.Confirm > 0 {
		f.add("Confirm runs", fmt.Sprint(s.Confirm), false)
	}
	if s.Parallel > 1 {
		f.add("Parallel trials", fmt.Sprint(s.Parallel), false)
	}
}

func htmlTrialOf(run *record.Run, t record.Trial) htmlTrial {
	h := htmlTrial{
		N:          t.N,
		Size:       t.Size,
		Outcome:    string(t.Outcome),
		Class:      htmlOutcomeClass(t.Outcome),
		Reason:     t.Reason,
		Seconds:    fmt.Sprintf("%.1f", t.Seconds),
		Allocated:  htmlBytesOr(t.Allocated),
		Reserved:   htmlBytesOr(t.Reserved),
		Device:     htmlBytesOr(t.Device),
		Throughput: "–",
		Phase:      t.Phase,
		Answer:     t.Outcome.Fits() && t.Size == run.Answer,
	}
	switch {
	case t.Held:
		h.Phase = strings.TrimSpace(h.Phase + " (held)")
	case t.Retry:
		h.Phase = strings.TrimSpace(h.Phase + " (retry)")
	}
	switch {
	case t.Signal != "":
		h.Exit = t.Signal
	case t.ExitCode != 0:
		h.Exit = fmt.Sprintf("exit %d", t.ExitCode)
	}
	if v := t.Throughput(); v > 0 {
		h.Throughput = fmt.Sprintf("%.0f", v)
	}
	if t.Outcome.TooLarge() {
		// What it needed at least, as everywhere (record.Trial.Needed),
		// under the column of its kind of memory: no peaks of its own.
		h.Allocated, h.Reserved, h.Device = t.MemoryText(allocatorOnly(run), "> ", "–"), "–", "–"
		if t.Needed(allocatorOnly(run)).Device {
			h.Allocated, h.Device = h.Device, h.Allocated
		}
	}
	for _, p := range []string{t.Stdout, t.Stderr} {
		if p != "" {
			h.Logs = append(h.Logs, htmlRelPath(p, run.LogDir))
		}
	}
	return h
}

// htmlRelPath shortens a log path under the run's log directory, which the
// facts table shows once, so the trials table stays narrow.
func htmlRelPath(path, dir string) string {
	if dir == "" {
		return path
	}
	if rel, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

func htmlOutcomeClass(o classify.Outcome) string {
	switch {
	case o.Fits():
		return "ok"
	case o.TooLarge():
		return "bad"
	case o == classify.Crash:
		return "crash"
	}
	return "muted"
}

// htmlChartOf renders one chart as inline SVG. A chart that cannot be drawn
// is named in the page rather than failing the whole report: the answer and
// the trials matter more than the picture.
func htmlChartOf(run *record.Run, draw func(io.Writer, *record.Run, string, int, int) error, label string) htmlChart {
	var buf bytes.Buffer
	if err := draw(&buf, run, "svg", ChartWidth, ChartHeight); err != nil {
		return htmlChart{Error: err.Error()}
	}
	svg := buf.String()
	// Drop the XML prolog and comment, which mean nothing inside HTML.
	i := strings.Index(svg, "<svg")
	if i < 0 {
		return htmlChart{Error: "the chart is not SVG"}
	}
	svg = `<svg role="img" aria-label="` + template.HTMLEscapeString(label) + `"` + strings.TrimPrefix(svg[i:], "<svg")
	// The SVG's text comes only from numbers and fixed labels in chart.go,
	// and gonum escapes it; none of the record's strings are drawn.
	return htmlChart{SVG: template.HTML(svg)}
}

// htmlCommand joins the command for display, quoting arguments the way a
// POSIX shell would need them, so it can be copied back into a terminal.
func htmlCommand(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = htmlShellQuote(a)
	}
	return strings.Join(q, " ")
}

func htmlShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%{}", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func htmlBytesOr(b uint64) string {
	if b == 0 {
		return "–"
	}
	return units.Bytes(b)
}

func htmlOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func htmlNumber(x float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", x), "0"), ".")
}

// htmlTemplate lays the page out; htmlView has its data.
//
//go:embed html.tmpl
var htmlTemplate string

var htmlPage = template.Must(template.New("report").Parse(htmlTemplate))
