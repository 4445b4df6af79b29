package live

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/runner"
	"github.com/batchfit/batchfit/internal/search"
)

// Both displays are the runner's Progress.
var (
	_ runner.Progress = (*Plain)(nil)
	_ runner.Progress = (*TTY)(nil)
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const gib = 1 << 30

func okTrial(n, size int, peakGiB, secs float64, phase search.Phase) record.Trial {
	return record.Trial{N: n, Size: size, Outcome: classify.OK, Seconds: secs, Phase: string(phase),
		Allocated: uint64(peakGiB * gib), StepTimes: []float64{1, 0.25, 0.25}}
}

func failTrial(n, size int, o classify.Outcome, peakGiB, secs float64, phase search.Phase) record.Trial {
	return record.Trial{N: n, Size: size, Outcome: o, Seconds: secs, Phase: string(phase),
		Device: uint64(peakGiB * gib), Reason: "CUDA out of memory. Tried to allocate 2.00 GiB"}
}

func TestPlainProgress(t *testing.T) {
	var buf bytes.Buffer
	p := NewPlain(&buf, Options{Capacity: 80 * gib, Limit: 24 * gib})
	p.Event(search.Event{Kind: search.EventPhase, Phase: search.PhaseBracket})
	p.Event(search.Event{Kind: search.EventPlan, Phase: search.PhaseBracket, Sizes: []int{256}})
	p.TrialStarted(1, 256, []int{0})
	p.TrialDone(okTrial(1, 256, 21.5, 13.4, search.PhaseBracket))
	p.Event(search.Event{Kind: search.EventObservation, Phase: search.PhaseBracket})
	p.Event(search.Event{Kind: search.EventBracket, Phase: search.PhaseBracket, Lo: 256})
	p.TrialDone(failTrial(2, 512, classify.OOM, 23.9, 9.8, search.PhaseBracket))
	p.Event(search.Event{Kind: search.EventBracket, Phase: search.PhaseBracket, Lo: 256, Hi: 512})
	p.Event(search.Event{Kind: search.EventPhase, Phase: search.PhaseRefine, Lo: 256, Hi: 512})
	p.Event(search.Event{Kind: search.EventPlan, Phase: search.PhaseRefine, Lo: 256, Hi: 512, Sizes: []int{282, 283}, Predicted: 282.7})
	p.Warn("trial 3: the adapter's report was unreadable (1 bad lines)")
	p.Close()
	p.Close()
	p.TrialDone(okTrial(3, 282, 23.6, 14, search.PhaseRefine)) // after Close: nothing

	want := `batchfit: bracket: growing until a size does not fit
batchfit: trial 1: batch 256 ok in 13.4s, peak 21.50 GiB of 24.00 GiB
batchfit: trial 2: batch 512 oom in 9.8s, needs more than 23.90 GiB of 24.00 GiB (CUDA out of memory. Tried to allocate 2.00 GiB)
batchfit: refine: bracket [256, 512]
batchfit: warning: trial 3: the adapter's report was unreadable (1 bad lines)
`
	if got := buf.String(); got != want {
		t.Errorf("plain progress:\n%s\nwant:\n%s", got, want)
	}
}

func TestPlainPhaseLines(t *testing.T) {
	for _, tc := range []struct {
		ev   search.Event
		want string
	}{
		{search.Event{Phase: search.PhaseBracket}, "bracket: growing until a size does not fit"},
		{search.Event{Phase: search.PhaseBracket, Lo: 128}, "bracket: 128 ran ok, growing until a size does not fit"},
		{search.Event{Phase: search.PhaseRefine, Lo: 256, Hi: 512}, "refine: bracket [256, 512]"},
		{search.Event{Phase: search.PhaseRefine, Hi: 8}, "refine: bracket [?, 8]"},
		{search.Event{Phase: search.PhaseRecheck, Lo: 256, Hi: 300}, "recheck: bracket [256, 300]"},
		{search.Event{Phase: search.PhaseConfirm, Lo: 282, Hi: 283}, "confirm: bracket [282, 283]"},
		{search.Event{Phase: search.PhaseConfirm, Lo: 4096}, "confirm: bracket [4096, ?]"},
	} {
		if got := phaseLine(tc.ev); got != tc.want {
			t.Errorf("phaseLine(%+v) = %q, want %q", tc.ev, got, tc.want)
		}
	}
}

// Trials finish on several goroutines at once: every line is whole.
func TestPlainProgressConcurrent(t *testing.T) {
	var buf bytes.Buffer
	p := NewPlain(&buf, Options{})
	var wg sync.WaitGroup
	for i := 1; i <= 50; i++ {
		wg.Go(func() {
			p.TrialStarted(i, i*8, []int{i % 4})
			p.TrialDone(okTrial(i, i*8, 1, 1, search.PhaseRefine))
			p.Event(search.Event{Kind: search.EventPhase, Phase: search.PhaseRefine, Lo: i, Hi: i + 9})
		})
	}
	wg.Wait()
	p.Close()
	line := regexp.MustCompile(`^batchfit: (trial \d+: batch \d+ ok in 1\.0s, peak 1\.00 GiB|refine: bracket \[\d+, \d+\])$`)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 100 {
		t.Fatalf("%d lines, want 100", len(lines))
	}
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Errorf("torn or unexpected line %q", l)
		}
	}
}

// testModel is the live model as NewTTY builds it.
func testModel(opts Options) *liveModel {
	if opts.MultipleOf == 0 {
		opts.MultipleOf = 1
	}
	if opts.Now == nil {
		opts.Now = newFakeClock().Now
	}
	return newLiveModel(newLook(opts), opts)
}

// TestLiveModel drives the live model through a search and reads its frames.
func TestLiveModel(t *testing.T) {
	clk := newFakeClock()
	m := testModel(Options{Capacity: 80 * gib, Limit: 24 * gib, Confirm: 1, Now: clk.Now})
	send := func(msg any) { m.Update(msg) }
	tick := func(d time.Duration) {
		clk.Advance(d)
		send(tickMsg{at: clk.Now()})
	}
	ev := func(e search.Event) { send(eventMsg{ev: e, at: clk.Now()}) }
	start := func(n, size int) { send(startMsg{n: n, size: size, at: clk.Now()}) }
	done := func(tr record.Trial) { send(doneMsg{t: tr, at: clk.Now()}) }
	frames := []struct {
		do   func()
		want string
	}{
		{func() {}, "starting · 0 trials · 0s\n"},
		{func() {
			ev(search.Event{Kind: search.EventPhase, Phase: search.PhaseBracket})
			ev(search.Event{Kind: search.EventPlan, Phase: search.PhaseBracket, Sizes: []int{256}})
			start(1, 256)
			tick(1500 * time.Millisecond)
		}, "" +
			"  1   256  ⠙ running                                               2s  bracket\n" +
			"bracket · growing until a size does not fit · round 1 · 1 trial · 2s\n"},
		{func() {
			clk.Advance(10 * time.Second)
			done(okTrial(1, 256, 21.5, 11.5, search.PhaseBracket))
			ev(search.Event{Kind: search.EventBracket, Phase: search.PhaseBracket, Lo: 256})
		},
			// No failure yet: no estimate.
			"bracket · 256 ran ok, growing until a size does not fit · round 1 · 1 trial · 12s\n"},
		{func() {
			ev(search.Event{Kind: search.EventPlan, Phase: search.PhaseBracket, Lo: 256, Sizes: []int{512}})
			start(2, 512)
			clk.Advance(8500 * time.Millisecond)
			done(failTrial(2, 512, classify.OOM, 23.9, 8.5, search.PhaseBracket))
			ev(search.Event{Kind: search.EventBracket, Phase: search.PhaseBracket, Lo: 256, Hi: 512})
		},
			// Bisection of [256, 512] takes 8 rounds of the mean 10s, and
			// the confirmation one more.
			"bracket · bracket [256, 512] · round 2 · 2 trials · 20s · ~1m30s left\n"},
		{func() {
			ev(search.Event{Kind: search.EventPhase, Phase: search.PhaseRefine, Lo: 256, Hi: 512})
			ev(search.Event{Kind: search.EventPlan, Phase: search.PhaseRefine, Lo: 256, Hi: 512, Sizes: []int{282, 283}, Predicted: 282.7})
			start(3, 282)
			start(4, 283)
			tick(4 * time.Second)
		}, "" +
			// Two trials side by side, the model's round: what is left is
			// this round (the mean 10s - 4s) and the confirmation (10s).
			"  3   282  ⠹ running                                               4s  refine\n" +
			"  4   283  ⠹ running                                               4s  refine\n" +
			"refine · bracket [256, 512] · predicted 282 · round 3 · 4 trials · 24s · ~16s left\n"},
		{func() {
			tick(3 * time.Second)
			done(failTrial(4, 283, classify.OOM, 23.9, 7, search.PhaseRefine))
		}, "" +
			"  3   282  ⠸ running                                               7s  refine\n" +
			"refine · bracket [256, 512] · predicted 282 · round 3 · 4 trials · 27s · ~11s left\n"},
		{func() {
			tick(5 * time.Second)
			done(okTrial(3, 282, 23.6, 12, search.PhaseRefine))
			ev(search.Event{Kind: search.EventBracket, Phase: search.PhaseRefine, Lo: 282, Hi: 283})
			ev(search.Event{Kind: search.EventPhase, Phase: search.PhaseConfirm, Lo: 282, Hi: 283})
			ev(search.Event{Kind: search.EventPlan, Phase: search.PhaseConfirm, Lo: 282, Hi: 283, Sizes: []int{282}})
			start(5, 282)
			tick(time.Second)
		}, "" +
			"  5   282  ⠴ running                                               1s  confirm\n" +
			"confirm · bracket [282, 283] · round 4 · 5 trials · 33s · ~9s left\n"},
		{func() {
			tick(9 * time.Second)
			done(okTrial(5, 282, 23.6, 9, search.PhaseConfirm))
		}, "confirm · bracket [282, 283] · round 4 · 5 trials · 42s · finishing\n"},
		{func() {
			send(closeMsg{at: clk.Now()})
			tick(time.Second) // ignored once closed
		}, "4 rounds · 5 trials in 42.0s · bracket [282, 283]\n\n"},
	}
	for i, f := range frames {
		f.do()
		got := m.View().Content
		if got != f.want {
			t.Errorf("frame %d:\n%s\nwant:\n%s", i, got, f.want)
		}
		if strings.Contains(got, "\x1b") {
			t.Errorf("frame %d has escape codes without colour: %q", i, got)
		}
	}
}

// Canceled trials (Ctrl-C) do not count towards the mean, and trials left
// running at Close are shown as unfinished, without a spinner.
func TestLiveModelInterrupted(t *testing.T) {
	clk := newFakeClock()
	m := testModel(Options{Now: clk.Now})
	m.Update(eventMsg{ev: search.Event{Kind: search.EventPhase, Phase: search.PhaseRefine, Lo: 8, Hi: 16}, at: clk.Now()})
	m.Update(eventMsg{ev: search.Event{Kind: search.EventPlan, Phase: search.PhaseRefine, Lo: 8, Hi: 16, Sizes: []int{10, 12}}, at: clk.Now()})
	m.Update(startMsg{n: 1, size: 10, at: clk.Now()})
	m.Update(startMsg{n: 2, size: 12, at: clk.Now()})
	clk.Advance(3 * time.Second)
	m.Update(doneMsg{t: record.Trial{N: 1, Size: 10, Outcome: classify.Canceled, Seconds: 3}, at: clk.Now()})
	if s := m.View().Content; strings.Contains(s, "left") {
		t.Errorf("an estimate from a canceled trial alone:\n%s", s)
	}
	m.Update(closeMsg{at: clk.Now()})
	want := "" +
		"  2    12  unfinished                         3s  refine\n" +
		"1 round · 2 trials in 3.0s · bracket [8, 16]\n\n"
	if got := m.View().Content; got != want {
		t.Errorf("closed frame:\n%s\nwant:\n%s", got, want)
	}
}

// The status counts rounds as the search plans them: a plan whose trials
// run in turns (a held card's, one at a time) is a round a turn.
func TestLiveModelRounds(t *testing.T) {
	clk := newFakeClock()
	m := testModel(Options{Now: clk.Now})
	start := func(n, size int) { m.Update(startMsg{n: n, size: size, at: clk.Now()}) }
	m.Update(eventMsg{ev: search.Event{Kind: search.EventPlan, Phase: search.PhaseBracket, Sizes: []int{8, 32, 128}, Rounds: 1}, at: clk.Now()})
	start(1, 8)
	start(2, 32)
	start(3, 128)
	// A held proof's plan: a round a trial, each counted as it begins.
	m.Update(eventMsg{ev: search.Event{Kind: search.EventPlan, Phase: search.PhaseConfirm, Lo: 276, Hi: 277, Sizes: []int{276, 277}, Rounds: 2}, at: clk.Now()})
	start(4, 276)
	if m.rounds != 2 {
		t.Errorf("%d rounds while the proof's first trial runs, want 2", m.rounds)
	}
	start(5, 277)
	m.Update(closeMsg{at: clk.Now()})
	if got := m.View().Content; !strings.Contains(got, "\n3 rounds · 5 trials in ") {
		t.Errorf("closed frame:\n%s\nwant 3 rounds", got)
	}
}

// ansi matches the escape codes lipgloss writes.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

func TestRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		t    record.Trial
		want string
	}{
		{"ok", Options{Capacity: 80 * gib},
			okTrial(1, 256, 20, 13.4, search.PhaseBracket),
			"  1   256  ok          █████░░░░░░░░░░░░░░░  20.00 GiB  250ms   13.4s  bracket"},
		{"oom at the limit", Options{Capacity: 80 * gib, Limit: 24 * gib},
			failTrial(12, 65536, classify.OOM, 24, 9.8, search.PhaseRefine),
			" 12 65536  oom         ████████████████│░░░ >24.00 GiB      -    9.8s  refine"},
		{"peak above the limit", Options{Capacity: 80 * gib, Limit: 24 * gib},
			failTrial(3, 300, classify.OOM, 27, 4, search.PhaseRefine),
			"  3   300  oom         ████████████████│█░░ >27.00 GiB      -    4.0s  refine"},
		{"no peak measured", Options{Capacity: 80 * gib},
			record.Trial{N: 2, Size: 8, Outcome: classify.Crash, Seconds: 75, Phase: "bracket"},
			"  2     8  crash       ░░░░░░░░░░░░░░░░░░░░          -      -   1m15s  bracket"},
		{"no GPU figures", Options{},
			record.Trial{N: 4, Size: 96, Outcome: classify.SizeLimit, Seconds: 2, Phase: "refine"},
			"  4    96  size_limit           -      -    2.0s  refine"},
		{"slow steps", Options{Capacity: 80 * gib},
			record.Trial{N: 5, Size: 64, Outcome: classify.OK, Seconds: 30, Device: 512 << 20, StepTimes: []float64{3, 2.5}, Phase: "confirm"},
			"  5    64  ok          ▏░░░░░░░░░░░░░░░░░░░  512.0 MiB  2.75s   30.0s  confirm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := testModel(tc.opts).look.row(tc.t)
			if plain != tc.want {
				t.Errorf("row:\n%q\nwant:\n%q", plain, tc.want)
			}
			withColor := tc.opts
			withColor.Color = true
			colored := testModel(withColor).look.row(tc.t)
			if !strings.Contains(colored, "\x1b[") {
				t.Errorf("no colour in %q", colored)
			}
			if got := ansi.ReplaceAllString(colored, ""); got != tc.want {
				t.Errorf("coloured row without its escapes:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}

// The columns of the heading, the finished rows and the running rows line
// up, whatever the outcome.
func TestColumnsAlign(t *testing.T) {
	m := testModel(Options{Capacity: 80 * gib, Limit: 40 * gib})
	header := strings.Split(m.look.header(), "\n")
	lines := []string{header[1]}
	for _, o := range []classify.Outcome{classify.OK, classify.OOM, classify.HostOOM, classify.SizeLimit, classify.Timeout, classify.Crash, classify.Canceled} {
		lines = append(lines, m.look.row(record.Trial{N: 10, Size: 1024, Outcome: o, Seconds: 12.5, Device: 30 * gib, Phase: "refine"}))
	}
	lines = append(lines, m.look.runningRow(runningTrial{n: 11, size: 1000, phase: search.PhaseRefine}, 3*time.Second, 0, false))
	phaseAt := strings.Index(header[1], "phase")
	for _, l := range lines {
		r := []rune(l)
		if len(r) < phaseAt || !strings.HasPrefix(string(r[phaseAt:]), "refine") && !strings.HasPrefix(string(r[phaseAt:]), "phase") {
			t.Errorf("the phase column is not at %d in\n%q", phaseAt, l)
		}
	}
}

func TestHeader(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Title: "batchfit demo", Simulated: true, GPU: "NVIDIA H100 80GB HBM3", Capacity: 80 * gib},
			"batchfit demo · simulated NVIDIA H100 80GB HBM3 · 80.00 GiB"},
		{Options{Title: "batchfit search", GPU: "NVIDIA H200", Capacity: 140 * gib, Limit: 24 * gib},
			"batchfit search · NVIDIA H200 · 140.00 GiB · │ limit 24.00 GiB"},
		{Options{Title: "batchfit demo", Simulated: true, GPU: "NVIDIA H100 80GB HBM3 (simulated)", Capacity: 80 * gib},
			"batchfit demo · NVIDIA H100 80GB HBM3 (simulated) · 80.00 GiB"},
		{Options{Title: "batchfit demo", Simulated: true},
			"batchfit demo · simulated"},
		{Options{}, "batchfit · no GPU memory figures"},
		{Options{Title: "batchfit search -- python examples/simclr/train.py --batch-size {} --max-steps 3", Capacity: 80 * gib},
			"batchfit search -- python examples/simclr/train… · 80.00 GiB"},
	} {
		got := strings.Split(testModel(tc.opts).look.header(), "\n")[0]
		if got != tc.want {
			t.Errorf("header %q, want %q", got, tc.want)
		}
	}
}

func TestMemoryBar(t *testing.T) {
	for _, tc := range []struct {
		peak, capacity, limit uint64
		want                  string
		filled, mark          int
	}{
		{0, 80, 0, "░░░░░░░░░░░░░░░░░░░░", 0, -1},
		{1, 1 << 40, 0, "▏░░░░░░░░░░░░░░░░░░░", 1, -1},
		{40, 80, 0, "██████████░░░░░░░░░░", 10, -1},
		{41, 80, 0, "██████████▎░░░░░░░░░", 11, -1},
		{80, 80, 0, "████████████████████", 20, -1},
		{200, 80, 0, "████████████████████", 20, -1},
		// A limit well below the card: the bar spans 5/4 of it.
		{12, 80, 24, "████████░░░░░░░░│░░░", 8, 16},
		{30, 80, 24, "████████████████│███", 20, 16},
		// A limit near the card: the bar spans the card.
		{40, 80, 72, "██████████░░░░░░░░│░", 10, 18},
		{40, 80, 80, "██████████░░░░░░░░░░", 10, -1},
		{40, 0, 0, "▏░░░░░░░░░░░░░░░░░░░", 1, -1},
	} {
		cells, filled, mark := memoryBar(tc.peak, tc.capacity, tc.limit)
		if string(cells) != tc.want || filled != tc.filled || mark != tc.mark {
			t.Errorf("memoryBar(%d, %d, %d) = %q, %d, %d; want %q, %d, %d", tc.peak, tc.capacity, tc.limit,
				string(cells), filled, mark, tc.want, tc.filled, tc.mark)
		}
	}
}

func TestEstimate(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name string
		e    estimate
		want time.Duration // -1: no estimate
	}{
		{"nothing finished", estimate{phase: search.PhaseRefine, lo: 1, hi: 512, running: []time.Duration{s}}, -1},
		{"no failure yet", estimate{phase: search.PhaseBracket, lo: 256, finished: 3, mean: 10 * s}, -1},
		{"bisect 256 cells", estimate{phase: search.PhaseRefine, lo: 256, hi: 512, finished: 2, mean: 10 * s}, 80 * s},
		{"bisect on a grid of 8", estimate{phase: search.PhaseRefine, lo: 256, hi: 512, step: 8, finished: 2, mean: 10 * s}, 50 * s},
		{"bisect, a round in flight", estimate{phase: search.PhaseRefine, lo: 256, hi: 512, finished: 2, mean: 10 * s, running: []time.Duration{4 * s}}, 76 * s},
		{"three probes a round", estimate{phase: search.PhaseRefine, lo: 256, hi: 512, finished: 2, mean: 10 * s, parallel: 3}, 40 * s},
		{"model round in flight", estimate{phase: search.PhaseRefine, lo: 256, hi: 512, predicted: true, finished: 2, mean: 10 * s, running: []time.Duration{4 * s, 4 * s}}, 6 * s},
		{"model between rounds", estimate{phase: search.PhaseRefine, lo: 256, hi: 512, predicted: true, finished: 2, mean: 10 * s}, 10 * s},
		{"a running trial past the mean", estimate{phase: search.PhaseRefine, lo: 282, hi: 284, finished: 2, mean: 10 * s, running: []time.Duration{15 * s}}, 0},
		{"trials waiting for a GPU", estimate{phase: search.PhaseRefine, lo: 256, hi: 260, finished: 2, mean: 10 * s, parallel: 1, running: []time.Duration{2 * s}, waiting: 2}, 38 * s},
		{"recheck keeps the bracket", estimate{phase: search.PhaseRecheck, lo: 256, hi: 260, finished: 2, mean: 10 * s, running: []time.Duration{2 * s}}, 28 * s},
		{"closed bracket, confirmations", estimate{phase: search.PhaseRefine, lo: 282, hi: 283, confirm: 3, finished: 9, mean: 10 * s}, 30 * s},
		{"confirming", estimate{phase: search.PhaseConfirm, lo: 282, hi: 283, finished: 9, mean: 10 * s, running: []time.Duration{3 * s}}, 7 * s},
	} {
		got, ok := tc.e.left()
		if !ok {
			got = -1
		}
		if got != tc.want {
			t.Errorf("%s: left() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// syncBuffer is a bytes.Buffer the program's goroutines may write to while
// the test waits.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTTYProgress runs the real bubbletea program (on a buffer, so without a
// terminal's size): callbacks from many goroutines, every finished trial
// printed once and in the order it finished, Close twice, calls after Close
// harmless.
func TestTTYProgress(t *testing.T) {
	var out syncBuffer
	clk := newFakeClock()
	p := NewTTY(&out, Options{Capacity: 80 * gib, Title: "batchfit demo", Now: clk.Now})
	p.Event(search.Event{Kind: search.EventPhase, Phase: search.PhaseRefine, Lo: 1, Hi: 1000})
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 1; i <= 20; i++ {
		wg.Go(func() {
			p.TrialStarted(i, i, []int{i % 4})
			// Record the order under the same lock as the call, so that
			// it is the order the calls were made.
			mu.Lock()
			p.TrialDone(okTrial(i, 100+i, 1, 1, search.PhaseRefine))
			order = append(order, i)
			mu.Unlock()
		})
	}
	wg.Wait()
	p.Warn("something to know")
	done := make(chan struct{})
	go func() {
		p.Close()
		p.Close()
		p.Event(search.Event{Kind: search.EventPhase, Phase: search.PhaseConfirm})
		p.TrialDone(okTrial(99, 999, 1, 1, search.PhaseConfirm))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	text := ansiAll.ReplaceAllString(out.String(), "")
	if !strings.Contains(text, "batchfit demo · 80.00 GiB") {
		t.Errorf("no header in:\n%s", text)
	}
	last := -1
	for _, n := range order {
		row := fmt.Sprintf("%3d %5d  ok ", n, 100+n)
		if c := strings.Count(text, row); c != 1 {
			t.Fatalf("row %q printed %d times in:\n%s", row, c, text)
		}
		at := strings.Index(text, row)
		if at < last {
			t.Errorf("trial %d printed out of order", n)
		}
		last = at
	}
	if !strings.Contains(text, "warning: something to know") {
		t.Errorf("no warning in:\n%s", text)
	}
	if !strings.Contains(text, "20 trials in 0.0s · bracket [1, 1000]") {
		t.Errorf("no final frame in:\n%s", text)
	}
	if strings.Contains(text, "999") {
		t.Errorf("a trial reported after Close was shown")
	}
}

// ansiAll matches every escape sequence bubbletea and lipgloss write.
var ansiAll = regexp.MustCompile("\x1b(\\[[0-9;?]*[a-zA-Z]|\\][^\x07]*\x07)")
