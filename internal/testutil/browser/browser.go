// Package browser exists for tests, and only tests import it: it opens a
// local HTML file in headless Chromium, the way a person would see it, and
// reports the page's console errors and uncaught exceptions, any request
// that leaves the file, and whether a screenshot of the page shows anything
// at all.
//
// It talks the DevTools protocol over --remote-debugging-pipe rather than
// reading Chromium's log: the log prints every console message at INFO level,
// so console.error cannot be told from console.log there, and failed or
// outgoing requests do not show at all.
package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrNotFound means no Chromium binary was found.
var ErrNotFound = errors.New("no chromium found (install the chromium package or put chromium, chromium-browser or google-chrome on PATH)")

// Window size of the page being checked, in CSS pixels. The screenshot is
// as wide as the window and as tall as the page, up to maxShotHeight.
const (
	windowWidth   = 1200
	windowHeight  = 2000
	maxShotHeight = 16000
)

// A page whose screenshot is blank is shot again every blankPoll until
// blankGrace has passed, so that only a page that stays blank counts as one.
const (
	blankGrace = 3 * time.Second
	blankPoll  = 100 * time.Millisecond
)

// defaultTimeout bounds a check when the caller's context has no deadline:
// a hung browser must not hang a test run.
const defaultTimeout = 60 * time.Second

// Find returns the path of a Chromium binary: chromium, chromium-browser,
// google-chrome or google-chrome-stable on PATH, else /usr/bin/chromium.
func Find() (string, error) {
	return find("/usr/bin/chromium")
}

// find is Find with the path tried when PATH has none.
func find(fallback string) (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	if fi, err := os.Stat(fallback); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return fallback, nil
	}
	return "", ErrNotFound
}

// Result is what Check saw.
type Result struct {
	// ConsoleErrors are console.error and console.assert messages, uncaught
	// exceptions, and errors the browser logged for the page (a resource
	// that failed to load, a blocked request), in the order they came.
	ConsoleErrors []string
	// Requests are the URLs the page asked for beyond the file itself and
	// data: URIs: anything here means the page is not self-contained.
	Requests []string
	// Width and Height are the screenshot's size in pixels.
	Width, Height int
	// Colors is the number of distinct colours in the screenshot.
	Colors int
	// Ink is the share of pixels that differ from the most common colour.
	Ink float64
	// Blank is true when the screenshot shows next to nothing: fewer than
	// minInkPixels pixels differ from the background, still after
	// blankGrace.
	Blank bool
}

// Check opens htmlPath in headless Chromium, waits for the page to load,
// collects console errors and outside requests, and takes a screenshot of
// the whole page, written as PNG to screenshotPath (when not empty) and
// analysed for blankness.
func Check(ctx context.Context, htmlPath, screenshotPath string) (Result, error) {
	exe, err := Find()
	if err != nil {
		return Result{}, err
	}
	abs, err := filepath.Abs(htmlPath)
	if err != nil {
		return Result{}, fmt.Errorf("check %s: %w", htmlPath, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return Result{}, fmt.Errorf("check page: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultTimeout)
		defer cancel()
	}

	b, err := launch(ctx, exe)
	if err != nil {
		return Result{}, fmt.Errorf("check %s: %w", htmlPath, err)
	}
	res, png, err := b.visit(ctx, (&url.URL{Scheme: "file", Path: abs}).String())
	b.close()
	if err != nil {
		return Result{}, fmt.Errorf("check %s: %w", htmlPath, err)
	}
	if screenshotPath != "" {
		if err := os.WriteFile(screenshotPath, png, 0o644); err != nil {
			return Result{}, fmt.Errorf("save screenshot: %w", err)
		}
	}
	return res, nil
}

// visit loads pageURL in a fresh tab and returns what it saw and a PNG
// screenshot of the whole page.
func (b *browser) visit(ctx context.Context, pageURL string) (Result, []byte, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return Result{}, nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return Result{}, nil, err
	}
	s := attached.SessionID
	w := b.watch(s)
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable", "Network.enable"} {
		if err := b.call(ctx, s, m, nil, nil); err != nil {
			return Result{}, nil, err
		}
	}
	if err := b.resize(ctx, s, windowHeight); err != nil {
		return Result{}, nil, err
	}
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.call(ctx, s, "Page.navigate", map[string]any{"url": pageURL}, &nav); err != nil {
		return Result{}, nil, err
	}
	if nav.ErrorText != "" {
		return Result{}, nil, fmt.Errorf("open %s: %s", pageURL, nav.ErrorText)
	}
	select {
	case <-w.loaded:
	case <-b.done:
		return Result{}, nil, b.exitErr()
	case <-ctx.Done():
		return Result{}, nil, fmt.Errorf("wait for the page to load: %w", ctx.Err())
	}

	if err := b.settle(ctx, s); err != nil {
		return Result{}, nil, err
	}
	// Painted is not always shown: a sandboxed frame (the notebook view)
	// runs in a process of its own, whose pixels reach the page's
	// compositor later, so on a loaded machine about one screenshot in 20
	// still came out empty. A blank page gets blankGrace to show something.
	var seen Result
	var png []byte
	for grace := time.Now().Add(blankGrace); ; {
		var err error
		if png, err = b.screenshot(ctx, s); err != nil {
			return Result{}, nil, err
		}
		if err := analyse(png, &seen); err != nil {
			return Result{}, nil, fmt.Errorf("screenshot: %w", err)
		}
		if !seen.Blank || time.Now().After(grace) {
			break
		}
		select {
		case <-time.After(blankPoll):
		case <-ctx.Done():
			return Result{}, nil, fmt.Errorf("wait for the page to show: %w", ctx.Err())
		}
	}
	// A round trip after the screenshot makes sure every event the page
	// sent before it has been read.
	if err := b.call(ctx, s, "Runtime.evaluate", map[string]any{"expression": "0"}, nil); err != nil {
		return Result{}, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	res := w.result()
	res.Width, res.Height, res.Colors, res.Ink, res.Blank = seen.Width, seen.Height, seen.Colors, seen.Ink, seen.Blank
	return res, png, nil
}

// screenshot captures the viewport as PNG.
func (b *browser) screenshot(ctx context.Context, s string) ([]byte, error) {
	var shot struct {
		Data string `json:"data"`
	}
	if err := b.call(ctx, s, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		return nil, err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return nil, fmt.Errorf("decode screenshot: %w", err)
	}
	return png, nil
}

// settle readies a loaded page for its screenshot: painted, and the
// viewport as tall as its content (up to maxShotHeight).
func (b *browser) settle(ctx context.Context, s string) error {
	// The load event fires once the page and its frames have loaded, not
	// once they have been painted: a screenshot right after it came out
	// blank now and then for a report in a frame (the notebook view, on a
	// loaded machine). Two animation frames later the page has been painted
	// (a second at most, should a hidden page get no frames).
	if err := b.call(ctx, s, "Runtime.evaluate", map[string]any{
		"expression":   "new Promise(r => { requestAnimationFrame(() => requestAnimationFrame(() => r(0))); setTimeout(() => r(0), 1000) })",
		"awaitPromise": true,
	}, nil); err != nil {
		return err
	}
	var metrics struct {
		CSSContentSize struct {
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	if err := b.call(ctx, s, "Page.getLayoutMetrics", nil, &metrics); err != nil {
		return err
	}
	if h := int(metrics.CSSContentSize.Height + 0.5); h > windowHeight {
		if err := b.resize(ctx, s, min(h, maxShotHeight)); err != nil {
			return err
		}
	}
	return nil
}

// resize sets the viewport, which is also the screenshot's size.
func (b *browser) resize(ctx context.Context, session string, height int) error {
	return b.call(ctx, session, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": windowWidth, "height": height, "deviceScaleFactor": 1, "mobile": false,
	}, nil)
}

// watcher gathers the events of one attached target.
type watcher struct {
	loaded     chan struct{}
	loadedOnce bool
	res        Result
	seen       map[string]bool
}

func (w *watcher) result() Result {
	r := w.res
	r.ConsoleErrors = append([]string(nil), r.ConsoleErrors...)
	r.Requests = append([]string(nil), r.Requests...)
	return r
}

// event records one DevTools event; it runs on the reader goroutine with
// the browser's lock held.
func (w *watcher) event(method string, params json.RawMessage) {
	switch method {
	case "Page.loadEventFired":
		if !w.loadedOnce {
			w.loadedOnce = true
			close(w.loaded)
		}
	case "Runtime.consoleAPICalled":
		if msg, ok := consoleError(params); ok {
			w.addError(msg)
		}
	case "Runtime.exceptionThrown":
		if msg, ok := exceptionText(params); ok {
			w.addError(msg)
		}
	case "Log.entryAdded":
		if msg, ok := logError(params); ok {
			w.addError(msg)
		}
	case "Network.requestWillBeSent":
		if u, ok := externalRequest(params); ok {
			w.res.Requests = append(w.res.Requests, u)
		}
	}
}

// consoleError reads a console.error or console.assert call.
func consoleError(params json.RawMessage) (string, bool) {
	var p struct {
		Type string `json:"type"`
		Args []struct {
			Type        string          `json:"type"`
			Value       json.RawMessage `json:"value"`
			Description string          `json:"description"`
		} `json:"args"`
	}
	if json.Unmarshal(params, &p) != nil || (p.Type != "error" && p.Type != "assert") {
		return "", false
	}
	var parts []string
	for _, a := range p.Args {
		var s string
		switch {
		case a.Type == "string" && json.Unmarshal(a.Value, &s) == nil:
			parts = append(parts, s)
		case a.Description != "":
			parts = append(parts, a.Description)
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		}
	}
	return "console." + p.Type + ": " + strings.Join(parts, " "), true
}

// exceptionText reads an uncaught exception, with where it was thrown.
func exceptionText(params json.RawMessage) (string, bool) {
	var p struct {
		Details struct {
			Text      string `json:"text"`
			URL       string `json:"url"`
			Line      int    `json:"lineNumber"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", false
	}
	d := p.Details
	msg := d.Text
	// text is "Uncaught" and the description "Error: x\n    at …".
	if first, _, _ := strings.Cut(d.Exception.Description, "\n"); first != "" {
		msg = strings.TrimSuffix(msg, ":") + " " + first
	}
	return fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.Line+1), true
}

// logError reads a log entry of level error (a failed load, a CSP report).
func logError(params json.RawMessage) (string, bool) {
	var p struct {
		Entry struct {
			Level string `json:"level"`
			Text  string `json:"text"`
			URL   string `json:"url"`
		} `json:"entry"`
	}
	if json.Unmarshal(params, &p) != nil || p.Entry.Level != "error" {
		return "", false
	}
	msg := p.Entry.Text
	if p.Entry.URL != "" {
		msg += " (" + p.Entry.URL + ")"
	}
	return msg, true
}

// externalRequest returns the URL of a request that leaves the page's own
// file (file:, data:, about: and blob: URLs stay inside it).
func externalRequest(params json.RawMessage) (string, bool) {
	var p struct {
		Request struct {
			URL string `json:"url"`
		} `json:"request"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", false
	}
	u, err := url.Parse(p.Request.URL)
	if err == nil && (u.Scheme == "file" || u.Scheme == "data" || u.Scheme == "about" || u.Scheme == "blob") {
		return "", false
	}
	return p.Request.URL, true
}

func (w *watcher) addError(msg string) {
	if w.seen[msg] {
		return
	}
	w.seen[msg] = true
	w.res.ConsoleErrors = append(w.res.ConsoleErrors, msg)
}

// errorTail is the end of Chromium's log, for error messages.
func errorTail(log []byte) string {
	const keep = 1500
	var lines []string
	for _, l := range strings.Split(string(bytes.TrimSpace(log)), "\n") {
		// D-Bus complaints are noise in every container.
		if !strings.Contains(l, "dbus") {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines, "\n")
	if len(s) > keep {
		s = "…" + s[len(s)-keep:]
	}
	return s
}
