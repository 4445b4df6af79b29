package report

import (
	"bytes"
	"context"
	"errors"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/testutil"
	"github.com/batchfit/batchfit/internal/testutil/browser"
)

func htmlRender(t *testing.T, run *record.Run) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, run); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	return buf.String()
}

// htmlHostile is a run whose every piece of text tries to break out of the
// page: the user's command, paths, messages, the GPU's and torch's names.
func htmlHostile() *record.Run {
	const attack = `<script>alert(1)</script>"'&`
	return &record.Run{
		ID:      `run<script>alert("id")</script>`,
		Status:  record.Failed,
		Started: time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC),
		Seconds: 12,
		Command: []string{"python", "-c", "<script>alert(1)</script>", `"'&`, "{}"},
		Dir:     `/home/x/"'&<b>bold</b>`,
		GPU: &record.GPUInfo{
			Devices:  []gpu.Device{{Name: `<i>GPU</i>` + attack, Total: 24 << 30, Driver: attack, CUDA: attack}},
			Capacity: 24 << 30,
		},
		Settings: record.Settings{Min: 1, Max: 64, Steps: 2, Strategy: `<em>s</em>`},
		Torch:    attack,
		Version:  `0.1<script>`,
		Trials: []record.Trial{
			{N: 1, Size: 8, Outcome: classify.OK, Phase: attack, Allocated: 1 << 30, StepTimes: []float64{0.1, 0.1},
				Stdout: `/logs/<script>alert(1)</script>.log`, Stderr: `/logs/"'&.log`},
			{N: 2, Size: 16, Outcome: classify.Crash, ExitCode: 1, Reason: `</td></tr></table><script>alert(1)</script>`,
				Tail: "Traceback:\n</pre><script>alert(2)</script>\n" + attack},
			{N: 3, Size: 32, Outcome: classify.Outcome(`<b>weird</b>`)},
		},
		Answer:   8,
		Error:    `command crashed: <img src=x onerror=alert(1)> "'&`,
		Warnings: []string{`<style>body{display:none}</style>` + attack},
		Model:    &record.Model{Figure: attack, Intercept: 1 << 30, Slope: 1 << 20},
		Soaks: []record.Soak{{Size: 8, Trial: 3, Limit: 60, Seconds: 30, Outcome: classify.Outcome(`<b>soak</b>`), Reason: attack,
			Steps: 2, StepPeaks: []uint64{1 << 30, 2 << 30}}},
		LogDir: `/logs/<dir>`,
	}
}

func TestWriteHTMLEscapes(t *testing.T) {
	page := htmlRender(t, htmlHostile())
	lower := strings.ToLower(page)
	for _, bad := range []string{"<script", "<img", "<b>", "<i>gpu", "<em>", "<style>body", `"'&`} {
		if strings.Contains(lower, strings.ToLower(bad)) {
			t.Errorf("page contains %q unescaped", bad)
		}
	}
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;",
		"&#34;&#39;&amp;",                      // the characters themselves
		"&lt;/pre&gt;&lt;script&gt;alert(2)",   // the crash tail
		"&lt;img src=x onerror=alert(1)&gt;",   // the error
		"/home/x/&#34;&#39;&amp;&lt;b&gt;bold", // the directory
		"&lt;style&gt;body{display:none}",      // a warning
		"&lt;b&gt;weird&lt;/b&gt;",             // an unknown outcome
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks the escaped form %q", want)
		}
	}
	// The command is shown as a shell would need it, then escaped.
	if want := `python -c &#39;&lt;script&gt;alert(1)&lt;/script&gt;&#39; &#39;&#34;&#39;\&#39;&#39;&amp;&#39; {}`; !strings.Contains(page, want) {
		t.Errorf("page lacks the quoted, escaped command %q", want)
	}
}

// TestWriteHTMLControlBytes: control characters and escape sequences in
// any text a run holds (ESC, BEL, C1 as UTF-8 and as raw bytes, a lone
// carriage return) do not reach the page, as they do not reach a terminal.
func TestWriteHTMLControlBytes(t *testing.T) {
	const ctl = "a\x1b[31mred\x1b[0m\x07bell\u009b\x9braw\x1b]0;title\x07\u0085end"
	run := htmlHostile()
	run.Command = append(run.Command, ctl)
	run.Dir += ctl
	run.Error += ctl
	run.Warnings = append(run.Warnings, ctl)
	run.GPU.Devices[0].Name += ctl
	run.Trials[1].Reason += ctl
	run.Trials[1].Tail += "progress 10%\rprogress 99%\n" + ctl
	page := htmlRender(t, run)
	for i, r := range page {
		if (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			t.Fatalf("page holds control character %U at %d: %q", r, i, page[max(i-30, 0):min(i+10, len(page))])
		}
	}
	if !strings.Contains(page, "aredbell") || !strings.Contains(page, "progress 99%") || strings.Contains(page, "progress 10%") {
		t.Errorf("the text around the control characters is not kept as a terminal shows it")
	}
}

func TestWriteHTMLSelfContained(t *testing.T) {
	for name, run := range map[string]*record.Run{"resnet50": chartResNet(t), "hostile": htmlHostile()} {
		page := strings.ToLower(htmlRender(t, run))
		// SVG's namespace names look like URLs but are never fetched.
		page = strings.NewReplacer(`xmlns="http://www.w3.org/2000/svg"`, "", `xmlns:xlink="http://www.w3.org/1999/xlink"`, "").Replace(page)
		for _, s := range []string{"<script", "<link", "<iframe", "<img", "<object", "<embed", "@import", "url(", "http://", "https://"} {
			if strings.Contains(page, s) {
				t.Errorf("%s: page contains %q: it must load nothing", name, s)
			}
		}
		if m := htmlAttrURL.FindString(page); m != "" {
			t.Errorf("%s: page has a tag that loads something: %q", name, m)
		}
	}
}

// htmlAttrURL finds a src or href attribute inside a tag (escaped text in
// the page, such as "&lt;img src=x", has no "<" and does not match).
var htmlAttrURL = regexp.MustCompile(`<[^>]*\s(src|href)\s*=`)

func TestWriteHTMLGolden(t *testing.T) {
	chartGolden(t, "html-resnet50.golden.html", []byte(htmlRender(t, chartResNet(t))))
}

func TestWriteHTMLContent(t *testing.T) {
	resnet := chartResNet(t)
	nonMono := chartResNet(t)
	nonMono.NonMonotonic = []record.Pair{{OK: 968, Fail: 960}}
	nonMono.Warnings = []string{"the CUDA context was not counted"}
	nonMono.Cached = true
	atRisk := chartResNet(t)
	atRisk.AtRisk = &record.Risk{Size: 940, From: 969, ShortfallBytes: 2 << 30, SlopeBytes: 80 << 20}
	limited := chartLimited(t)
	failed := &record.Run{Status: record.Failed, Error: "trial 2 crashed: exit 1", Settings: record.Settings{Min: 1, Max: 64},
		Trials: []record.Trial{
			{N: 1, Size: 8, Outcome: classify.OK},
			{N: 2, Size: 16, Outcome: classify.Crash, ExitCode: 1, Tail: "ImportError: no module named foo", Stderr: "/tmp/l/2.err"},
		},
		Answer: 8}
	shapes := chartResNet(t)
	shapes.InputShapes = &record.InputShapes{WhyNot: "iterable dataset", Trial: 3,
		Ranges: []record.ShapeRange{{Tensors: []string{"input_ids"}, Smallest: []int{968, 384}, Largest: []int{968, 1024}}}}
	tests := []struct {
		name string
		run  *record.Run
		want []string
		not  []string
	}{
		{"input shapes", shapes, []string{"Input shapes", "input_ids 968x384 … 968x1024; trials ran in the program's order (iterable dataset)"}, nil},
		{"found", resnet, []string{
			`<div class="number">968</div>`, "968 ran ok; 969 does not (oom).",
			"With 5 % of memory free: 920.",
			"fastest: 484, 5.0 % more samples/s than 968 (beyond the measured noise)",
			"NVIDIA A100-SXM4-80GB · 80.00 GiB · driver 550.54.15 · CUDA 12.4",
			"/home/ana/simclr", "2.6.0+cu124", "0.1.0", "2025-03-14 09:30:00 UTC", "1 min 43 s", "10 min",
			"1 – 4096, starting at 64", "model", "6 to find, 1 to prove",
			"peak allocated ≈ 1.62 GiB + 80.5 MiB × batch size",
			"trial-001-bs64.stdout.log", "CUDA out of memory. Tried to allocate 196.00 MiB",
			"77.72 GiB", "79.42 GiB", "79.96 GiB", "2522", `class="answer-row"`,
			`aria-label="Peak GPU memory by batch size"`, `aria-label="Training throughput by batch size"`,
		}, []string{"Memory limit", `role="alert"`, "<h2>Soak</h2>"}},
		{"non-monotonic, warnings, cached", nonMono, []string{
			"Non-monotonic", "Batch size 960 failed below 968, which ran", "the CUDA context was not counted",
			"Answered from the history"}, nil},
		{"at risk", atRisk, []string{"At risk", "Not exact: by its failures' own figures sizes from 940 up can fail"}, nil},
		{"memory limit", limited, []string{"24.00 GiB (25769803776 bytes) (--memory-limit)", "NVIDIA H200 · 141.00 GiB"}, nil},
		{"soaked", chartSoaked(t), []string{
			"<h2>Soak</h2>", "for up to 10 min (--soak)", "A soak that did not fit moved the answer down",
			`aria-label="Peak memory by step during --soak"`, "moved the answer down to 967", "kept the answer",
			"5 min 12 s", "3120", "79.90 GiB", "soaked: stopped by batchfit after 10m0s", `class="moved-row"`,
			`<div class="number">967</div>`, "967 ran ok; 968 does not (oom).",
		}, nil},
		{"soaked, kept", htmlSoakKept(t), []string{"<h2>Soak</h2>", "kept the answer"},
			[]string{"moved the answer", "A soak that did not fit", `class="moved-row"`, "largest first"}},
		{"soaked, largest batches first", htmlSoakWorstFirst(t), []string{"The soak ran the whole loader's batches largest first"}, nil},
		{"nothing fits", &record.Run{Status: record.NothingFits, Settings: record.Settings{Min: 4},
			Trials: []record.Trial{{N: 1, Size: 4, Outcome: classify.OOM}}},
			[]string{"No batch size fits", "Even batch size 4 does not run.", `<div class="number">—</div>`, "nothing fits"},
			[]string{"Training throughput"}},
		{"failed", failed, []string{"The search failed", "trial 2 crashed: exit 1", "exit 1",
			"Output of trial 2, batch size 16: crash", "ImportError: no module named foo", "/tmp/l/2.err"}, nil},
		{"interrupted", &record.Run{Status: record.Interrupted, Answer: 32},
			[]string{"interrupted; largest size seen to run", `<div class="number">32</div>`, "No trials were run."}, nil},
		{"still running", &record.Run{Status: record.Running},
			[]string{"did not finish", "no trials were run"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Compare text as a reader sees it: html/template writes "+" as &#43;.
			page := html.UnescapeString(htmlRender(t, tt.run))
			for _, s := range tt.want {
				if !strings.Contains(page, s) {
					t.Errorf("page lacks %q", s)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(page, s) {
					t.Errorf("page has %q, want it absent", s)
				}
			}
		})
	}
}

// htmlSoakKept is the soaked fixture as if its first soak had survived.
func htmlSoakKept(t *testing.T) *record.Run {
	run := chartSoaked(t)
	run.Soaks = run.Soaks[1:]
	run.Soaks[0].Size = 968
	run.Answer, run.FirstFailure, run.Warnings = 968, 969, nil
	return run
}

// htmlSoakWorstFirst is the kept soak as one that ran the loader's largest
// batches first.
func htmlSoakWorstFirst(t *testing.T) *record.Run {
	run := htmlSoakKept(t)
	run.Soaks[0].WorstFirst = true
	return run
}

func TestWriteHTMLErrors(t *testing.T) {
	if err := WriteHTML(&bytes.Buffer{}, nil); err == nil {
		t.Error("WriteHTML(nil) succeeded")
	}
	if err := WriteHTML(htmlFailWriter{}, chartResNet(t)); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteHTML to a failing writer: %v, want the write error", err)
	}
}

type htmlFailWriter struct{}

func (htmlFailWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestHTMLShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"python", "python"},
		{"--batch-size={}", "--batch-size={}"},
		{"", "''"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
		{"x;rm -rf /", "'x;rm -rf /'"},
	}
	for _, tt := range tests {
		if got := htmlShellQuote(tt.in); got != tt.want {
			t.Errorf("htmlShellQuote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// The report as a person sees it: opened in a real browser it shows
// something, logs no error and asks the network for nothing. Set
// BATCHFIT_REPORT_SHOTS to a directory to keep the screenshots and look.
func TestWriteHTMLInBrowser(t *testing.T) {
	testutil.NeedsFull(t, "Chromium")
	if _, err := browser.Find(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	shots := os.Getenv("BATCHFIT_REPORT_SHOTS")
	runs := []struct {
		name string
		run  *record.Run
	}{
		{"resnet50", chartResNet(t)},
		{"hostile", htmlHostile()},
		{"no-figures", chartNoFigures()},
		{"soaked", chartSoaked(t)},
	}
	for _, tt := range runs {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			page := filepath.Join(dir, "report.html")
			if err := os.WriteFile(page, []byte(htmlRender(t, tt.run)), 0o644); err != nil {
				t.Fatal(err)
			}
			shot := filepath.Join(dir, "report.png")
			if shots != "" {
				shot = filepath.Join(shots, "report-"+tt.name+".png")
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := browser.Check(ctx, page, shot)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.ConsoleErrors) > 0 {
				t.Errorf("console errors: %q", res.ConsoleErrors)
			}
			if len(res.Requests) > 0 {
				t.Errorf("the page asked the network for %q", res.Requests)
			}
			if res.Blank || res.Colors < 16 {
				t.Errorf("screenshot looks empty: blank %v, %d colours, %.3f ink", res.Blank, res.Colors, res.Ink)
			}
		})
	}
}

// Every inline chart in the page is the same SVG WriteMemoryChart makes,
// minus the XML prolog.
func TestWriteHTMLInlinesCharts(t *testing.T) {
	run := chartResNet(t)
	page := htmlRender(t, run)
	var svg bytes.Buffer
	if err := WriteMemoryChart(&svg, run, "svg", ChartWidth, ChartHeight); err != nil {
		t.Fatal(err)
	}
	body := svg.String()[strings.Index(svg.String(), "<svg")+len("<svg"):]
	if !strings.Contains(page, body) {
		t.Error("the page does not inline the memory chart's SVG")
	}
	if n := len(regexp.MustCompile(`<svg role="img"`).FindAllString(page, -1)); n != 2 {
		t.Errorf("page has %d inline charts, want 2", n)
	}
	soaked := htmlRender(t, chartSoaked(t))
	svg.Reset()
	if err := WriteSoakChart(&svg, chartSoaked(t), "svg", ChartWidth, ChartHeight); err != nil {
		t.Fatal(err)
	}
	if body := svg.String()[strings.Index(svg.String(), "<svg")+len("<svg"):]; !strings.Contains(soaked, body) {
		t.Error("the page does not inline the soak chart's SVG")
	}
	if n := len(regexp.MustCompile(`<svg role="img"`).FindAllString(soaked, -1)); n != 3 {
		t.Errorf("the soaked run's page has %d inline charts, want 3", n)
	}
	if strings.Contains(page, "<?xml") {
		t.Error("page keeps the SVG's XML prolog")
	}
}

// The fragment a notebook shows is the page's body, byte for byte: one
// element whose every style rule applies under it alone (nothing leaks into
// the notebook around it), with no script.
func TestWriteHTMLFragment(t *testing.T) {
	for name, run := range map[string]*record.Run{"resnet50": chartResNet(t), "hostile": htmlHostile(), "soaked": chartSoaked(t)} {
		var buf bytes.Buffer
		if err := WriteHTMLFragment(&buf, run); err != nil {
			t.Fatal(err)
		}
		frag := buf.String()
		page := htmlRender(t, run)
		body := page[strings.Index(page, "<body>")+len("<body>") : strings.LastIndex(page, "</body>")]
		if strings.TrimSpace(body) != frag {
			t.Errorf("%s: the page's body is not the fragment", name)
		}
		if !strings.HasPrefix(frag, `<div class="batchfit-report">`) || !strings.HasSuffix(frag, "</div>") || strings.Count(frag, "<style>") != 1 {
			t.Errorf("%s: the fragment is not one element with its styles: %.80q … %.40q", name, frag, frag[max(len(frag)-40, 0):])
		}
		if strings.Contains(strings.ToLower(frag), "<script") {
			t.Errorf("%s: the fragment holds a script", name)
		}
		css := frag[strings.Index(frag, "<style>")+len("<style>") : strings.Index(frag, "</style>")]
		for _, sel := range htmlSelectors(css) {
			// div.: the notebook's own rules for its outputs (a table's,
			// say) weigh as much as a class and an element.
			if sel != "div.batchfit-report" && !strings.HasPrefix(sel, "div.batchfit-report ") {
				t.Errorf("%s: style rule %q applies outside the report", name, sel)
			}
		}
	}
}

// htmlSelectors are the selectors of css's rules, those inside @media
// included (the at-rules themselves are not selectors).
func htmlSelectors(css string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`([^{}]+)\{`).FindAllStringSubmatch(css, -1) {
		if s := strings.TrimSpace(m[1]); !strings.HasPrefix(s, "@") {
			for _, sel := range strings.Split(s, ",") {
				out = append(out, strings.TrimSpace(sel))
			}
		}
	}
	return out
}
