package python

import (
	"context"
	"encoding/json"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/testutil/browser"
)

// notebookCell runs the demo the way a notebook user does.
const notebookCell = "import batchfit\nresult = batchfit.demo()\nresult"

// testNotebook executes a notebook of notebookCell with Jupyter (nbconvert
// and ipykernel: Debian's python3-nbconvert and python3-ipykernel, which
// scripts/test installs) against the binary bin, checks what its outputs
// hold (the live view's final state, the report inline), converts it to
// HTML and screenshots that in headless Chromium, which must show the
// report: its answer's green and its chart's blue and red. With
// BATCHFIT_NOTEBOOK_SHOT set the screenshot is written there too (the
// README's docs/notebook.png).
func testNotebook(t *testing.T, py, bin string) {
	if exec.Command(py, "-c", "import nbconvert, nbformat, ipykernel").Run() != nil {
		t.Skipf("%s has no nbconvert or ipykernel (scripts/test installs python3-nbconvert python3-ipykernel)", py)
	}
	if _, err := browser.Find(); err != nil {
		t.Skipf("chromium missing (scripts/test installs it): %v", err)
	}
	dir := t.TempDir()
	abs, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	nb := map[string]any{
		"nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{"kernelspec": map[string]any{"name": "python3", "display_name": "Python 3", "language": "python"}},
		"cells": []any{map[string]any{"cell_type": "code", "id": "demo", "metadata": map[string]any{}, "execution_count": nil,
			"outputs": []any{}, "source": notebookCell}},
	}
	raw, _ := json.Marshal(nb)
	if err := os.WriteFile(filepath.Join(dir, "demo.ipynb"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "BATCHFIT_BINARY="+bin, "PYTHONPATH="+abs, "PYTHONDONTWRITEBYTECODE=1",
		"XDG_CACHE_HOME="+dir, "PYDEVD_DISABLE_FILE_VALIDATION=1", "JUPYTER_PLATFORM_DIRS=1")
	run(t, dir, env, py, "-m", "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=120",
		"demo.ipynb", "--output", "executed.ipynb")

	// The cell's outputs: the live view, updated in place to its last
	// state, then the result, whose HTML is the report inline.
	raw, err = os.ReadFile(filepath.Join(dir, "executed.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	var executed struct {
		Cells []struct {
			Outputs []struct {
				Type string                     `json:"output_type"`
				Data map[string]json.RawMessage `json:"data"`
			} `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(raw, &executed); err != nil || len(executed.Cells) != 1 {
		t.Fatalf("read the executed notebook: %v", err)
	}
	var live, report []string
	for _, o := range executed.Cells[0].Outputs {
		h := notebookText(o.Data["text/html"])
		switch {
		case o.Type == "display_data" && strings.Contains(h, `class="batchfit-live"`):
			live = append(live, h)
		case o.Type == "execute_result":
			report = append(report, h)
		case o.Type == "stream" || o.Type == "error":
			t.Errorf("the cell wrote %s output: %s", o.Type, raw)
		}
	}
	if len(live) != 1 {
		t.Fatalf("%d live views, want one display updated in place", len(live))
	}
	for _, want := range []string{`data-done="true"`, "batchfit demo", "(simulated)", "bracket [952, 953]",
		"<td class=\"num\">953</td><td><span class=\"bad\">oom</span>", "&gt; 79.99 GiB", "· finished"} {
		if !strings.Contains(live[0], want) {
			t.Errorf("the live view's last state lacks %q:\n%s", want, live[0])
		}
	}
	if len(report) != 1 || !strings.HasPrefix(report[0], `<div class="batchfit-report">`) ||
		strings.Contains(report[0], "<iframe") || strings.Contains(report[0], "<script") || !strings.Contains(report[0], "<svg") {
		t.Fatalf("the result's view is not the report inline: %.300q", report)
	}

	run(t, dir, env, py, "-m", "nbconvert", "--to", "html", "executed.ipynb", "--output", "executed.html")
	shot := filepath.Join(dir, "notebook.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The page nbconvert writes asks a CDN for its scripts (RequireJS,
	// MathJax), which this offline browser cannot reach: its requests and
	// their errors are nbconvert's, not the report's.
	res, err := browser.Check(ctx, filepath.Join(dir, "executed.html"), shot)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blank {
		t.Fatalf("the notebook's screenshot is blank (%s)", shot)
	}
	counts := notebookColors(t, shot, map[string]color.RGBA{
		"answer green": {0x0a, 0x7a, 0x55, 0xff}, "chart blue": {0x00, 0x72, 0xb2, 0xff}, "failure red": {0xd6, 0x27, 0x28, 0xff},
	})
	for name, n := range counts {
		if n < 40 {
			t.Errorf("the screenshot has %d pixels of the report's %s: the report did not render (%s)", n, name, shot)
		}
	}
	if out := os.Getenv("BATCHFIT_NOTEBOOK_SHOT"); out != "" {
		b, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(out, b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// notebookText is a notebook output's text: a string, or a list of lines.
func notebookText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var lines []string
	_ = json.Unmarshal(raw, &lines)
	return strings.Join(lines, "")
}

// notebookColors counts the pixels of the PNG at path near each colour.
func notebookColors(t *testing.T, path string, want map[string]color.RGBA) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b uint8) bool { return a-b < 24 || b-a < 24 }
	counts := map[string]int{}
	for name := range want {
		counts[name] = 0
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			for name, w := range want {
				if near(c.R, w.R) && near(c.G, w.G) && near(c.B, w.B) {
					counts[name]++
				}
			}
		}
	}
	return counts
}
