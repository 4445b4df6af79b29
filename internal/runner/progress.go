package runner

import (
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// Progress shows a search as it runs (package live shows it on stderr).
// Its methods may be called from several goroutines: the search's events
// and the prober's trial callbacks.
type Progress interface {
	Event(search.Event)
	TrialStarted(n, size int, gpus []int)
	TrialDone(t record.Trial)
	Warn(msg string)
	// Close ends the display; later calls do nothing.
	Close()
}

// ProgressInfo is what a display shows about the search besides its
// events.
type ProgressInfo struct {
	GPU      string // the first GPU's name; "" when unknown
	Capacity uint64 // its memory in bytes; 0 when unknown
	Limit    uint64 // --memory-limit in bytes; 0 for none
	// AllocatorOnly says Limit holds only the framework's allocator
	// (--memory-limit-scope allocator).
	AllocatorOnly bool
	Simulated     bool
	// MultipleOf and Confirm help estimate the time left.
	MultipleOf, Confirm int
}

// nopProgress shows nothing.
type nopProgress struct{}

func (nopProgress) Event(search.Event)           {}
func (nopProgress) TrialStarted(int, int, []int) {}
func (nopProgress) TrialDone(record.Trial)       {}
func (nopProgress) Warn(string)                  {}
func (nopProgress) Close()                       {}

// Progresses shows a search on every one of ps: a display on stderr and an
// event stream (--events), say.
func Progresses(ps ...Progress) Progress {
	if len(ps) == 1 {
		return ps[0]
	}
	return progresses(ps)
}

type progresses []Progress

func (ps progresses) Event(ev search.Event) {
	for _, p := range ps {
		p.Event(ev)
	}
}

func (ps progresses) TrialStarted(n, size int, gpus []int) {
	for _, p := range ps {
		p.TrialStarted(n, size, gpus)
	}
}

func (ps progresses) TrialDone(t record.Trial) {
	for _, p := range ps {
		p.TrialDone(t)
	}
}

func (ps progresses) Warn(msg string) {
	for _, p := range ps {
		p.Warn(msg)
	}
}

func (ps progresses) Close() {
	for _, p := range ps {
		p.Close()
	}
}
