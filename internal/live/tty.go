package live

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/mattn/go-isatty"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/termtext"
	"github.com/batchfit/batchfit/internal/units"
)

// TTY is the live display: a bubbletea program whose small live
// area (the running trials and a status line) sits under the finished
// trials, which are printed above it once and so stay in the scrollback.
type TTY struct {
	// mu keeps the messages of one call together and in order: a finished
	// trial's row must be printed in the order the trials finished, and
	// nothing may be sent after Close.
	mu     sync.Mutex
	prog   *tea.Program
	look   *look
	now    func() time.Time
	closed bool
	done   chan struct{}
}

// NewTTY starts the live display on w, the terminal.
func NewTTY(w io.Writer, opts Options) *TTY {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MultipleOf < 1 {
		opts.MultipleOf = 1
	}
	l := newLook(opts)
	t := &TTY{look: l, now: opts.Now, done: make(chan struct{})}
	teaOpts := []tea.ProgramOption{
		tea.WithOutput(w),
		// No input: the terminal stays out of raw mode, so Ctrl-C is a
		// SIGINT for batchfit's own handler, which cancels the search;
		// and no query is sent to the terminal, whose reply nobody would
		// read.
		tea.WithInput(nil),
		tea.WithoutSignalHandler(),
	}
	if f, ok := w.(*os.File); !ok || !isatty.IsTerminal(f.Fd()) {
		// Not a terminal (tests): without a size nothing is drawn.
		teaOpts = append(teaOpts, tea.WithWindowSize(80, 24))
	}
	t.prog = tea.NewProgram(newLiveModel(l, opts), teaOpts...)
	go func() {
		defer close(t.done)
		// An error leaves the terminal as it was; progress is not worth
		// failing a search for, and Send does nothing once Run returned.
		_, _ = t.prog.Run()
	}()
	t.print(l.header())
	return t
}

// send delivers msgs to the program in order, unless it is closed.
func (t *TTY) send(msgs ...tea.Msg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for _, m := range msgs {
		t.prog.Send(m)
	}
}

// print puts lines above the live area, where they stay. tea.Println's
// message is sent directly rather than returned as a command from Update,
// because commands run on goroutines of their own and could reorder rows or
// arrive after the program quit.
func (t *TTY) print(s string) { t.send(tea.Println(s)()) }

func (t *TTY) Event(ev search.Event) {
	t.send(eventMsg{ev: ev, at: t.now()})
}

func (t *TTY) TrialStarted(n, size int, gpus []int) {
	t.send(startMsg{n: n, size: size, gpus: slices.Clone(gpus), at: t.now()})
}

func (t *TTY) TrialDone(tr record.Trial) {
	t.send(doneMsg{t: tr, at: t.now()}, tea.Println(t.look.row(tr))())
}

func (t *TTY) Warn(msg string) {
	t.print(t.look.warning(termtext.Line(msg, termtext.Width)))
}

func (t *TTY) Close() {
	t.mu.Lock()
	if !t.closed {
		t.prog.Send(closeMsg{at: t.now()})
		t.prog.Send(tea.QuitMsg{})
		t.closed = true
	}
	t.mu.Unlock()
	<-t.done
}

// The messages the live model takes. Each carries the time it was sent, so
// the model reads no clock of its own.
type (
	eventMsg struct {
		ev search.Event
		at time.Time
	}
	startMsg struct {
		n, size int
		gpus    []int
		at      time.Time
	}
	doneMsg struct {
		t  record.Trial
		at time.Time
	}
	tickMsg  struct{ at time.Time }
	closeMsg struct{ at time.Time }
)

// tickEvery is how often the spinner turns and the clocks move.
const tickEvery = 100 * time.Millisecond

// spinner is the frames shown beside a running trial.
var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// runningTrial is a trial that started and has not finished.
type runningTrial struct {
	n, size int
	gpus    []int
	phase   search.Phase
	start   time.Time
}

// liveModel is the state of the live area. Finished trials are not in it:
// they are printed above it as they finish.
type liveModel struct {
	look  *look
	clock func() time.Time
	opts  Options

	start, now time.Time
	frame      int
	closed     bool

	phase     search.Phase
	lo, hi    int
	predicted float64
	trials    int // started, in all
	rounds    int // begun, in all: what a user waits for
	// The plan in flight: how many trials it has, how many of them
	// started, and how many run at once (a round of it; a held proof's
	// plan is a round a trial).
	planned, planStarted, perRound int

	running  []runningTrial
	parallel int // the most trials seen running at once
	finished int // trials finished, not counting canceled ones
	busy     time.Duration
}

func newLiveModel(l *look, opts Options) *liveModel {
	now := opts.Now()
	return &liveModel{look: l, clock: opts.Now, opts: opts, start: now, now: now}
}

func (m *liveModel) tick() tea.Cmd {
	return tea.Tick(tickEvery, func(time.Time) tea.Msg { return tickMsg{at: m.clock()} })
}

func (m *liveModel) Init() tea.Cmd { return m.tick() }

func (m *liveModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case eventMsg:
		m.now = msg.at
		ev := msg.ev
		if ev.Phase != "" {
			m.phase = ev.Phase
		}
		m.lo, m.hi = ev.Lo, ev.Hi
		if ev.Kind == search.EventPlan {
			m.planned, m.planStarted = len(ev.Sizes), 0
			rounds := max(ev.Rounds, 1)
			m.perRound = (len(ev.Sizes) + rounds - 1) / rounds
			m.predicted = ev.Predicted
			m.rounds++ // its first round begins
		}
	case startMsg:
		m.now = msg.at
		m.trials++
		m.planStarted++
		if m.perRound > 0 && m.planStarted > m.perRound && (m.planStarted-1)%m.perRound == 0 {
			m.rounds++ // the plan's next round begins
		}
		m.running = append(m.running, runningTrial{n: msg.n, size: msg.size, gpus: msg.gpus, phase: m.phase, start: msg.at})
		m.parallel = max(m.parallel, len(m.running))
	case doneMsg:
		m.now = msg.at
		m.running = slices.DeleteFunc(m.running, func(r runningTrial) bool { return r.n == msg.t.N })
		if msg.t.Outcome != classify.Canceled {
			m.finished++
			m.busy += time.Duration(msg.t.Seconds * float64(time.Second))
		}
	case tickMsg:
		if m.closed {
			return m, nil
		}
		m.now = msg.at
		m.frame++
		return m, m.tick()
	case closeMsg:
		m.now = msg.at
		m.closed = true
	}
	return m, nil
}

// estimate gathers what the time left is estimated from.
func (m *liveModel) estimate() estimate {
	e := estimate{
		phase: m.phase, lo: m.lo, hi: m.hi, step: m.opts.MultipleOf,
		predicted: m.predicted > 0, parallel: m.parallel, finished: m.finished,
		waiting: max(m.planned-m.planStarted, 0),
	}
	if m.finished > 0 {
		e.mean = m.busy / time.Duration(m.finished)
	}
	if m.phase != search.PhaseConfirm && m.phase != search.PhaseMargin {
		e.confirm = m.opts.Confirm
	}
	for _, r := range m.running {
		e.running = append(e.running, m.now.Sub(r.start))
	}
	return e
}

// View draws the live area. Nothing is read from the terminal, so bracketed
// paste is left off.
func (m *liveModel) View() tea.View {
	v := tea.NewView(m.draw())
	v.DisableBracketedPasteMode = true
	return v
}

// draw draws the running trials and the status line. It ends in a newline
// so that the line bubbletea clears when it stops is an empty one, and the
// last frame stays whole.
func (m *liveModel) draw() string {
	var b strings.Builder
	for _, r := range m.running {
		b.WriteString(m.look.runningRow(r, m.now.Sub(r.start), m.frame, m.closed))
		b.WriteString("\n")
	}
	b.WriteString(m.status())
	b.WriteString("\n")
	if m.closed {
		// A blank line between the progress and the result that follows.
		b.WriteString("\n")
	}
	return b.String()
}

// status is the line under the trials: where the search stands, how long it
// has run and how long it may still need.
func (m *liveModel) status() string {
	l := m.look
	elapsed := m.now.Sub(m.start)
	var parts []string
	if m.closed {
		if m.rounds > 0 {
			parts = append(parts, plural(m.rounds, "round"))
		}
		parts = append(parts, fmt.Sprintf("%s in %s", plural(m.trials, "trial"), units.Duration(elapsed.Seconds())))
		if m.phase != "" {
			parts = append(parts, bracketText(m.lo, m.hi))
		}
		return l.dim.Render(strings.Join(parts, " · "))
	}
	phase := string(m.phase)
	if m.phase == "" {
		phase = "starting"
	} else {
		parts = append(parts, standing(m.phase, m.lo, m.hi))
	}
	if m.predicted > 0 {
		parts = append(parts, fmt.Sprintf("predicted %d", int(m.predicted)))
	}
	if m.rounds > 0 {
		parts = append(parts, fmt.Sprintf("round %d", m.rounds))
	}
	parts = append(parts, plural(m.trials, "trial"), units.RoughDuration(elapsed.Seconds()))
	if left, ok := m.estimate().left(); ok {
		if left < time.Second {
			parts = append(parts, "finishing")
		} else {
			parts = append(parts, "~"+units.RoughDuration(left.Seconds())+" left")
		}
	}
	return l.phase.Render(phase) + l.dim.Render(" · ") + strings.Join(parts, l.dim.Render(" · "))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// look holds the styles and the column layout of the live display.
type look struct {
	opts Options
	// Colours are the terminal's own 16, so they follow its theme; OOM is
	// an expected answer in a search, so it is yellow, not an alarm.
	ok, tooLarge, crash, dim, title, phase, mark, spin lipgloss.Style
}

// newLook returns the styles; without colour every style is plain, so that
// nothing but text is ever written (NO_COLOR means no bold or faint either).
func newLook(opts Options) *look {
	if !opts.Color {
		return &look{opts: opts}
	}
	s := lipgloss.NewStyle
	return &look{
		opts:     opts,
		ok:       s().Foreground(lipgloss.Color("2")),
		tooLarge: s().Foreground(lipgloss.Color("3")),
		crash:    s().Foreground(lipgloss.Color("1")).Bold(true),
		dim:      s().Faint(true),
		title:    s().Bold(true),
		phase:    s().Foreground(lipgloss.Color("6")).Bold(true),
		mark:     s().Foreground(lipgloss.Color("5")),
		spin:     s().Foreground(lipgloss.Color("6")),
	}
}

// Column widths, in cells.
const (
	colN       = 3
	colSize    = 5
	colOutcome = 10
	colPeak    = 10
	colStep    = 6
	colTime    = 6
)

// header is printed once at the start: what runs, on what, and the heading
// of the trial columns.
func (l *look) header() string {
	o := l.opts
	title := o.Title
	if title == "" {
		title = "batchfit"
	}
	sep := l.dim.Render(" · ")
	var b strings.Builder
	// A long command would push the GPU off the line.
	b.WriteString(l.title.Render(termtext.Clip(title, 48)))
	switch {
	case o.Simulated && !strings.Contains(o.GPU, "simulated"):
		b.WriteString(sep + l.dim.Render(strings.TrimSpace("simulated "+o.GPU)))
	case o.GPU != "":
		b.WriteString(sep + l.dim.Render(o.GPU))
	}
	if o.Capacity > 0 {
		b.WriteString(sep + l.dim.Render(units.Bytes(o.Capacity)))
	} else if o.GPU == "" && !o.Simulated {
		b.WriteString(sep + l.dim.Render("no GPU memory figures"))
	}
	if o.Limit > 0 {
		b.WriteString(sep + l.mark.Render("│") + l.dim.Render(" limit "+units.Bytes(o.Limit)))
	}

	peak := "peak"
	if o.Capacity > 0 {
		peak = ""
	}
	cols := l.columns("#", "size", padRight("outcome", colOutcome), padRight("peak memory", barCells), peak, "step", "time", "phase")
	return b.String() + "\n" + l.dim.Render(cols)
}

// outcomeStyle colours an outcome by what it means for the search.
func (l *look) outcomeStyle(o classify.Outcome) lipgloss.Style {
	switch {
	case o.Fits():
		return l.ok
	case o.TooLarge():
		return l.tooLarge
	case o == classify.Crash:
		return l.crash
	}
	return l.dim
}

// columns lays out a line of the trial table. outcome comes padded (and
// maybe styled), bar is left out when there is no capacity to draw against.
func (l *look) columns(n, size, outcome, bar, peak, step, dur, phase string) string {
	s := padLeft(n, colN) + " " + padLeft(size, colSize) + "  " + outcome + "  "
	if l.opts.Capacity > 0 {
		s += bar + " "
	}
	return s + padLeft(peak, colPeak) + " " + padLeft(step, colStep) + "  " + padLeft(dur, colTime) + "  " + phase
}

// row is a finished trial's line.
func (l *look) row(t record.Trial) string {
	st := l.outcomeStyle(t.Outcome)
	peak, _ := t.Memory(l.opts.AllocatorOnly)
	return l.columns(fmt.Sprint(t.N), fmt.Sprint(t.Size), st.Render(padRight(string(t.Outcome), colOutcome)),
		l.bar(peak, st), t.MemoryText(l.opts.AllocatorOnly, ">", "-"), stepTime(t), units.Duration(t.Seconds), l.dim.Render(t.Phase))
}

// runningRow is a running trial's line: a spinner where the outcome will be
// and the time it has run so far.
func (l *look) runningRow(r runningTrial, ran time.Duration, frame int, stopped bool) string {
	outcome := l.dim.Render(padRight("unfinished", colOutcome))
	if !stopped {
		outcome = l.spin.Render(spinner[frame%len(spinner)]) + " " + l.dim.Render(padRight("running", colOutcome-2))
	}
	return l.columns(fmt.Sprint(r.n), fmt.Sprint(r.size), outcome, strings.Repeat(" ", barCells), "", "",
		units.RoughDuration(ran.Seconds()), l.dim.Render(string(r.phase)))
}

// bar draws a memory bar: the filled part in the outcome's colour, the rest
// faint, the --memory-limit as a mark. Runs of one style are rendered
// together, to keep the escape codes few.
func (l *look) bar(peak uint64, fill lipgloss.Style) string {
	cells, filled, mark := memoryBar(peak, l.opts.Capacity, l.opts.Limit)
	styleOf := func(i int) lipgloss.Style {
		switch {
		case i == mark:
			return l.mark
		case i < filled:
			return fill
		}
		return l.dim
	}
	var b strings.Builder
	from := 0
	for i := 1; i <= len(cells); i++ {
		if i == len(cells) || i == mark || i-1 == mark || (i < filled) != (i-1 < filled) {
			b.WriteString(styleOf(from).Render(string(cells[from:i])))
			from = i
		}
	}
	return b.String()
}

func (l *look) warning(msg string) string {
	return l.tooLarge.Render("warning:") + " " + msg
}
