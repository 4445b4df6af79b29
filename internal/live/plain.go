package live

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/termtext"
	"github.com/batchfit/batchfit/internal/units"
)

// Plain writes progress as plain lines, for logs and pipes: one per
// finished trial and one per phase change, each prefixed "batchfit: ".
type Plain struct {
	mu       sync.Mutex
	w        io.Writer
	capacity uint64
	// allocatorOnly: the limit holds the allocator only (record.Trial.Memory).
	allocatorOnly bool
	closed        bool
}

// NewPlain returns plain lines on w. To show nothing (--quiet), pass
// io.Discard.
func NewPlain(w io.Writer, opts Options) *Plain {
	return &Plain{w: w, capacity: opts.memoryCap(), allocatorOnly: opts.AllocatorOnly}
}

func (p *Plain) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		fmt.Fprintf(p.w, "batchfit: %s\n", s)
	}
}

func (p *Plain) Event(ev search.Event) {
	if ev.Kind == search.EventPhase {
		p.line(phaseLine(ev))
	}
}

func (p *Plain) TrialStarted(n, size int, gpus []int) {}

func (p *Plain) TrialDone(t record.Trial) {
	p.line(trialLine(t, p.capacity, p.allocatorOnly))
}

func (p *Plain) Warn(msg string) { p.line("warning: " + termtext.Line(msg, termtext.Width)) }

func (p *Plain) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// trialLine is the one-line progress report of a finished trial, its
// memory against capacity (allocatorOnly as for record.Trial.Memory).
func trialLine(t record.Trial, capacity uint64, allocatorOnly bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "trial %d: batch %d %s in %s", t.N, t.Size, t.Outcome, units.Duration(t.Seconds))
	switch {
	case t.Held:
		b.WriteString(" (held)") // the proof's, on a held card
	case t.Retry:
		b.WriteString(" (retry)")
	}
	if m, more := t.Memory(allocatorOnly); m > 0 {
		word := "peak"
		if more {
			word = "needs more than"
		}
		fmt.Fprintf(&b, ", %s %s", word, units.Bytes(m))
		if capacity > 0 {
			fmt.Fprintf(&b, " of %s", units.Bytes(capacity))
		}
	}
	if t.Reason != "" && !t.Outcome.Fits() {
		fmt.Fprintf(&b, " (%s)", termtext.Line(t.Reason, 100))
	}
	return b.String()
}
