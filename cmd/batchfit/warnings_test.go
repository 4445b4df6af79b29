package main

import (
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/record"
)

// A warning is shown once, whether it comes as it happens (line) or with
// the finished run (run), and whatever control characters it holds.
func TestWarningsShowEachOnce(t *testing.T) {
	var b strings.Builder
	ws := newWarnings(&b)
	msg := "the command ignores the batch size\x1b[31m: it printed\tthe same"
	ws.warn(msg)
	ws.warn(msg)
	ws.line("warning: gpu 0 is in use")
	ws.run(&record.Run{Warnings: []string{msg, "gpu 0 is in use", "a new one"}})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("shown:\n%s\nwant 3 lines: each warning once", b.String())
	}
	if strings.ContainsAny(b.String(), "\x1b\t") {
		t.Errorf("shown %q: control characters reach the terminal", b.String())
	}
}
