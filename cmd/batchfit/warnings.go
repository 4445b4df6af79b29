package main

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/runner"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/termtext"
)

// warnings writes a search's warnings on stderr, each once. -q drops the
// progress but never a warning: its stdout is a bare number, which must not
// pass for an answer a warning takes back (a command that ignores the batch
// size, a flaky boundary).
type warnings struct {
	mu   sync.Mutex
	w    io.Writer
	seen map[string]bool
}

func newWarnings(w io.Writer) *warnings { return &warnings{w: w, seen: map[string]bool{}} }

// line writes "batchfit: msg", cleaned of control sequences; a warning in
// it goes through warn.
func (ws *warnings) line(msg string) {
	if w, ok := strings.CutPrefix(msg, "warning: "); ok {
		ws.warn(w)
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	fmt.Fprintf(ws.w, "batchfit: %s\n", termtext.Clean(msg))
}

// warn writes msg as a warning unless it was shown already, as it happens
// (line) or before. A warning is known by its whole cleaned text, which
// the line shows clipped: one with control characters in it is the same
// warning before and after, and two that differ past the clip are two.
func (ws *warnings) warn(msg string) {
	key := termtext.Line(msg, 0)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.seen[key] {
		return
	}
	ws.seen[key] = true
	fmt.Fprintf(ws.w, "batchfit: warning: %s\n", termtext.Clip(key, termtext.Width))
}

// isWarning says whether a notice is a warning, which -q keeps.
func isWarning(msg string) bool { return strings.HasPrefix(msg, "warning: ") }

// run writes the warnings a run recorded that were not shown as it ran.
func (ws *warnings) run(r *record.Run) {
	for _, w := range r.Warnings {
		ws.warn(w)
	}
}

// quietProgress is the display of -q: nothing but its warnings.
type quietProgress struct{ ws *warnings }

var _ runner.Progress = quietProgress{}

func (quietProgress) Event(search.Event)           {}
func (quietProgress) TrialStarted(int, int, []int) {}
func (quietProgress) TrialDone(record.Trial)       {}
func (p quietProgress) Warn(msg string)            { p.ws.warn(msg) }
func (quietProgress) Close()                       {}
