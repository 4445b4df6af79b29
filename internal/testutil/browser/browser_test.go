package browser

import (
	"context"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/testutil"
)

// needChromium skips the test where no browser is installed; CI installs
// the chromium package so these run there.
func needChromium(t *testing.T) {
	t.Helper()
	testutil.NeedsFull(t, "Chromium")
	if _, err := Find(); err != nil {
		t.Skipf("skipping: %v", err)
	}
}

func check(t *testing.T, page string) (Result, string) {
	t.Helper()
	shot := filepath.Join(t.TempDir(), "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Check(ctx, filepath.Join("testdata", page), shot)
	if err != nil {
		t.Fatalf("Check(%s): %v", page, err)
	}
	return res, shot
}

func TestCheck(t *testing.T) {
	needChromium(t)
	tests := []struct {
		page     string
		blank    bool
		errors   []string // substrings, one per expected console error
		requests []string // substrings of the outside requests
	}{
		{page: "plain.html"},
		{page: "frame.html"},
		{page: "throw.html", errors: []string{"Uncaught Error: x"}},
		{page: "console.html", errors: []string{"console.error: broken 42"}},
		{page: "blank.html", blank: true},
		{page: "dark-blank.html", blank: true},
		{page: "remote.html",
			errors:   []string{"cdn.example.invalid/style.css", "missing-image.png"},
			requests: []string{"https://cdn.example.invalid/style.css"}},
	}
	for _, tt := range tests {
		t.Run(tt.page, func(t *testing.T) {
			res, shot := check(t, tt.page)
			if res.Blank != tt.blank {
				t.Errorf("Blank = %v, want %v (colours %d, ink %.5f)", res.Blank, tt.blank, res.Colors, res.Ink)
			}
			if len(res.ConsoleErrors) != len(tt.errors) {
				t.Errorf("console errors = %q, want %d matching %q", res.ConsoleErrors, len(tt.errors), tt.errors)
			}
			for _, want := range tt.errors {
				if !containsAny(res.ConsoleErrors, want) {
					t.Errorf("console errors = %q, want one containing %q", res.ConsoleErrors, want)
				}
			}
			if len(res.Requests) != len(tt.requests) {
				t.Errorf("requests = %q, want %q", res.Requests, tt.requests)
			}
			for _, want := range tt.requests {
				if !containsAny(res.Requests, want) {
					t.Errorf("requests = %q, want one containing %q", res.Requests, want)
				}
			}
			f, err := os.Open(shot)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cfg, err := png.DecodeConfig(f)
			if err != nil {
				t.Fatalf("screenshot is not a PNG: %v", err)
			}
			if cfg.Width != windowWidth || cfg.Height < windowHeight || cfg.Width != res.Width || cfg.Height != res.Height {
				t.Errorf("screenshot %d×%d, result says %d×%d, want %d wide and at least %d tall",
					cfg.Width, cfg.Height, res.Width, res.Height, windowWidth, windowHeight)
			}
		})
	}
}

// A page taller than the window is captured whole.
func TestCheckTallPage(t *testing.T) {
	needChromium(t)
	page := filepath.Join(t.TempDir(), "tall.html")
	html := `<!DOCTYPE html><html><head><meta charset="utf-8"><title>tall</title></head>` +
		`<body style="margin:0"><div style="height:3000px;background:#eee"></div><p>end</p></body></html>`
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Check(context.Background(), page, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Height < 3000 || res.Blank {
		t.Errorf("got %d×%d blank=%v, want the whole 3000+ px page, not blank", res.Width, res.Height, res.Blank)
	}
}

func TestCheckMissingFile(t *testing.T) {
	needChromium(t)
	_, err := Check(context.Background(), filepath.Join(t.TempDir(), "nope.html"), "")
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Check(missing file) error = %v, want one wrapping os.ErrNotExist", err)
	}
}

func TestCheckCanceled(t *testing.T) {
	needChromium(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Check(ctx, filepath.Join("testdata", "plain.html"), ""); err == nil {
		t.Fatal("Check with a canceled context succeeded, want an error")
	}
}

func TestFindNothing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := find(filepath.Join(dir, "chromium")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("find with an empty PATH and no fallback: %v, want ErrNotFound", err)
	}
	// A fallback that is there but cannot run is not found either.
	fallback := filepath.Join(dir, "chromium")
	if err := os.WriteFile(fallback, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := find(fallback); !errors.Is(err, ErrNotFound) {
		t.Fatalf("find with a fallback that is not executable: %v, want ErrNotFound", err)
	}
}

func containsAny(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
