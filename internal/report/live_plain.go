package report

import (
	"fmt"
	"io"
	"sync"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/termtext"
)

// plainProgress writes progress as plain lines, for logs and pipes: one per
// finished trial and one per phase change, each prefixed "batchfit: ".
type plainProgress struct {
	mu       sync.Mutex
	w        io.Writer
	capacity uint64
	// allocatorOnly: the limit holds the allocator only (record.Trial.Memory).
	allocatorOnly bool
	closed        bool
}

func (p *plainProgress) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		fmt.Fprintf(p.w, "batchfit: %s\n", s)
	}
}

func (p *plainProgress) Event(ev search.Event) {
	if ev.Kind == search.EventPhase {
		p.line(phaseLine(ev))
	}
}

func (p *plainProgress) TrialStarted(n, size int, gpus []int) {}

func (p *plainProgress) TrialDone(t record.Trial) {
	p.line(TrialLine(t, p.capacity, p.allocatorOnly))
}

func (p *plainProgress) Warn(msg string) { p.line("warning: " + termtext.Line(msg, termtext.Width)) }

func (p *plainProgress) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}
