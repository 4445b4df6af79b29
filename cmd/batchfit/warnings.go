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

// line writes "batchfit: msg" and notes a warning in it as shown.
func (ws *warnings) line(msg string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w, ok := strings.CutPrefix(msg, "warning: "); ok {
		ws.seen[w] = true
	}
	fmt.Fprintf(ws.w, "batchfit: %s\n", msg)
}

// warn writes msg as a warning unless it was shown already. Warnings are
// known by their cleaned text, the one line shows and notes: a message with
// control characters in it is the same warning before and after.
func (ws *warnings) warn(msg string) {
	msg = termtext.Line(msg, termtext.Width)
	ws.mu.Lock()
	shown := ws.seen[msg]
	ws.mu.Unlock()
	if !shown {
		ws.line("warning: " + msg)
	}
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
