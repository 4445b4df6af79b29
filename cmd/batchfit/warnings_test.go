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
	holder := "gpu 0 (X): pid 4242 (evil\x1b[31m) holds 2.00 GiB"
	ws.line("warning: " + holder)
	long := strings.Repeat("another search is running on the same GPU ", 10)
	ws.line("warning: " + long + "one")
	ws.run(&record.Run{Warnings: []string{msg, holder, long + "one", long + "two", "a new one"}})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("shown:\n%s\nwant 5 lines: each warning once, two long ones that differ past the clip both", b.String())
	}
	if strings.ContainsAny(b.String(), "\x1b\t") {
		t.Errorf("shown %q: control characters reach the terminal", b.String())
	}
}
