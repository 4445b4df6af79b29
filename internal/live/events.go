package live

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// Events writes progress as JSON lines (--events), one object a line, for
// a program to follow the search with: the Python API's live view in a
// notebook. Every line has "event": "start" (the GPU, its capacity and
// limit), "phase", "bracket" and "plan" (the search's steps, with its
// bracket [lo, hi]), "trial_started", "trial" (a finished trial: the run
// record's trial object and the one memory figure the other displays show),
// "warning", and "end" when the display closes. docs/json.md documents the
// fields.
type Events struct {
	mu            sync.Mutex
	enc           *json.Encoder
	allocatorOnly bool
	closed        bool
}

// NewEvents returns an event stream on w, which it writes a start event to.
func NewEvents(w io.Writer, opts Options) *Events {
	e := &Events{enc: json.NewEncoder(w), allocatorOnly: opts.AllocatorOnly}
	e.enc.SetEscapeHTML(false) // "> 79.99 GiB" as it reads, for every reader
	e.write(map[string]any{
		"event": "start", "title": opts.Title, "gpu": opts.GPU, "capacity_bytes": opts.Capacity,
		"limit_bytes": opts.Limit, "simulated": opts.Simulated,
	})
	return e
}

// write encodes one line; a reader that went away costs the search nothing.
func (e *Events) write(v map[string]any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		_ = e.enc.Encode(v)
	}
}

func (e *Events) Event(ev search.Event) {
	switch ev.Kind {
	case search.EventPhase, search.EventBracket, search.EventPlan:
	default:
		return // a trial's end comes with its record (TrialDone)
	}
	line := map[string]any{"event": string(ev.Kind), "phase": string(ev.Phase), "lo": ev.Lo, "hi": ev.Hi}
	if ev.Kind == search.EventPlan {
		line["sizes"], line["rounds"], line["predicted"] = ev.Sizes, max(ev.Rounds, 1), ev.Predicted
	}
	e.write(line)
}

func (e *Events) TrialStarted(n, size int, gpus []int) {
	e.write(map[string]any{"event": "trial_started", "n": n, "batch_size": size, "gpus": gpus})
}

func (e *Events) TrialDone(t record.Trial) {
	b, more := t.Memory(e.allocatorOnly)
	e.write(map[string]any{
		"event": "trial", "trial": t, "memory_bytes": b, "needs_more": more,
		"memory_text": t.MemoryText(e.allocatorOnly, "> ", ""),
	})
}

func (e *Events) Warn(msg string) { e.write(map[string]any{"event": "warning", "message": msg}) }

func (e *Events) Close() {
	e.write(map[string]any{"event": "end"})
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
}
