// Package live shows a search to the person running it while it runs, on
// stderr: a live display on a terminal (TTY), plain lines otherwise (Plain).
// Both are the runner's Progress; this package declares no interface of its
// own.
package live

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// Options say what a progress display shows and how.
type Options struct {
	// Color allows colour on a TTY. Callers set it false when NO_COLOR is
	// set; plain lines have none.
	Color bool
	// Capacity is the GPU's memory in bytes (the whole card, not the
	// --memory-limit); 0 when unknown, and then no memory bars are drawn.
	Capacity uint64
	// Limit is --memory-limit in bytes, marked on the memory bars; 0 for none.
	Limit uint64
	// AllocatorOnly says Limit holds the framework's allocator only
	// (--memory-limit-scope allocator): trials are shown by the allocator's
	// reserved memory, which it holds, rather than NVML's.
	AllocatorOnly bool
	// Simulated says the GPU is the simulator's.
	Simulated bool
	// GPU names the device, e.g. "NVIDIA H200"; "" when unknown.
	GPU string
	// Title heads the display, e.g. "batchfit demo".
	Title string
	// MultipleOf and Confirm are the search's settings, used only to
	// estimate the time left; 0 means 1 and none.
	MultipleOf, Confirm int
	// Now is the clock; nil means time.Now. Tests pass a fake.
	Now func() time.Time
}

// The methods of Plain and TTY may be called from several goroutines: the
// search's OnEvent and the prober's trial callbacks. Close ends the display,
// leaving its last frame on the screen, and returns when the terminal is
// back to normal; later calls do nothing, and the other methods do nothing
// after it.

// memoryCap is what a trial may use: the limit where one is set.
func (o Options) memoryCap() uint64 {
	if o.Limit > 0 {
		return o.Limit
	}
	return o.Capacity
}

// bracketText shows the search's bracket, "?" for a side not known yet.
func bracketText(lo, hi int) string {
	if lo == 0 && hi == 0 {
		return "no bracket yet"
	}
	side := func(v int) string {
		if v == 0 {
			return "?"
		}
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("bracket [%s, %s]", side(lo), side(hi))
}

// stepTime formats a trial's median step time, or "-" without one.
func stepTime(t record.Trial) string {
	// Throughput is size over the median step time: invert it rather than
	// keep a second median.
	v := t.Throughput()
	if v <= 0 {
		return "-"
	}
	s := float64(t.Size) / v
	if s < 1 {
		return fmt.Sprintf("%.0fms", s*1000)
	}
	return fmt.Sprintf("%.2fs", s)
}

// phaseLine is the plain line of a phase change.
func phaseLine(ev search.Event) string {
	return fmt.Sprintf("%s: %s", ev.Phase, standing(ev.Phase, ev.Lo, ev.Hi))
}

// standing says where the search stands in its phase: the bracket, or while
// no size has failed yet, that it is growing.
func standing(phase search.Phase, lo, hi int) string {
	switch {
	case phase == search.PhaseBracket && hi == 0 && lo == 0:
		return "growing until a size does not fit"
	case phase == search.PhaseBracket && hi == 0:
		return fmt.Sprintf("%d ran ok, growing until a size does not fit", lo)
	}
	return bracketText(lo, hi)
}

// estimate is what the time left is estimated from.
type estimate struct {
	phase     search.Phase
	lo, hi    int
	step      int
	predicted bool // the model planned the latest round
	confirm   int  // confirmation runs still to come after refining
	parallel  int  // trials that run at once
	mean      time.Duration
	finished  int // trials finished, the basis of mean
	// The round in flight: how long its running trials have run, and how
	// many of its trials have not started.
	running []time.Duration
	waiting int
}

// left estimates the time the search still needs: the round in flight, then
// the rounds that close the bracket (one where the memory model predicts the
// boundary, since it probes the prediction and its neighbour together; else
// one per halving, or per (parallel+1)-th with several probes a round), then
// confirmation. It reports false while there is no basis: no trial has
// finished, or no size has failed yet so the bracket is open.
func (e estimate) left() (time.Duration, bool) {
	if e.finished == 0 || e.mean <= 0 {
		return 0, false
	}
	k := max(e.parallel, 1)
	var cur time.Duration
	for _, r := range e.running {
		cur = max(cur, e.mean-r)
	}
	inFlight := len(e.running) > 0 || e.waiting > 0
	cur += time.Duration((e.waiting+k-1)/k) * e.mean

	rounds := 0
	switch e.phase {
	case search.PhaseBracket, search.PhaseRefine, search.PhaseRecheck:
		if e.hi == 0 {
			return 0, false
		}
		cells := (e.hi - e.lo) / max(e.step, 1)
		if cells > 1 {
			if e.predicted {
				rounds = 1
			} else {
				rounds = int(math.Ceil(math.Log(float64(cells)) / math.Log(float64(k+1))))
			}
		}
		// The bracket does not know the results of the round in flight
		// yet, except in a re-check, which leaves the bracket as it was.
		if inFlight && e.phase != search.PhaseRecheck {
			rounds = max(rounds-1, 0)
		}
		rounds += (e.confirm + k - 1) / k
	}
	return cur + time.Duration(rounds)*e.mean, true
}

// barCells is the width of a memory bar.
const barCells = 20

// eighths draws the part of a bar cell, from 1/8 to 7/8 full.
var eighths = []rune("▏▎▍▌▋▊▉")

// memoryBar draws peak memory in barCells cells. The bar spans the card's
// capacity, or with a --memory-limit well below it, 5/4 of the limit: the
// limit is what a trial may use, so the cells go to the range that decides
// the answer, with room to show a peak above the limit. The limit's cell is
// marked. It returns the cells, how many are (partly) filled, and the
// mark's index (-1 without a limit).
func memoryBar(peak, capacity, limit uint64) (cells []rune, filled, mark int) {
	scale := float64(capacity)
	if limit > 0 && limit < capacity {
		scale = min(scale, float64(limit)*5/4)
	}
	cells = make([]rune, barCells)
	n8 := 0
	if scale > 0 {
		n8 = int(math.Round(min(float64(peak)/scale, 1) * barCells * 8))
	}
	if peak > 0 && n8 == 0 {
		n8 = 1 // a measured peak is never drawn as nothing
	}
	filled = (n8 + 7) / 8
	for i := range cells {
		switch {
		case i < n8/8:
			cells[i] = '█'
		case i < filled:
			cells[i] = eighths[n8%8-1]
		default:
			cells[i] = '░'
		}
	}
	mark = -1
	if limit > 0 && limit < capacity {
		mark = min(int(float64(limit)/scale*barCells), barCells-1)
		cells[mark] = '│'
	}
	return cells, filled, mark
}

// padLeft and padRight pad plain text to n cells.
func padLeft(s string, n int) string {
	return strings.Repeat(" ", max(n-len([]rune(s)), 0)) + s
}

func padRight(s string, n int) string {
	return s + strings.Repeat(" ", max(n-len([]rune(s)), 0))
}
