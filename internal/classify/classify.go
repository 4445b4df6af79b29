package classify

import (
	"fmt"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/termtext"
)

// Input is everything known about a finished trial.
type Input struct {
	ExitCode int            // exit status; meaningless when Signal is set
	Signal   syscall.Signal // signal that killed the trial's leader; 0 if it exited
	TimedOut bool           // batchfit killed it for running past its time limit
	Canceled bool           // batchfit killed it because the user canceled (Ctrl-C)
	// HostOOMEvidence is set when the kernel recorded an OOM kill during the
	// trial (the cgroup's oom_kill count rose, or the kernel said so).
	HostOOMEvidence bool
	// Output is the trial's output (stderr, then stdout). It is scanned
	// for error signatures only when Matches is nil.
	Output []byte
	// Matches are the signatures found in the whole output as the trial
	// wrote it (a Scanner's); nil means scan Output.
	Matches *Matches
	Event   *adapter.Event // the adapter's exit event; nil if none
}

// Result is the verdict on one trial.
type Result struct {
	Outcome Outcome
	// Reason is a short human reason: the matched line of output, "exit
	// status 3", "killed by SIGKILL (kernel OOM kill)", ...
	Reason string
	// Signature names the error text that decided the outcome; empty when
	// none did.
	Signature string
}

// maxReason bounds Reason: it goes on one line of a summary, the full
// output is in the log file.
const maxReason = 200

// Classify decides how a trial ended. The order matters: batchfit's own
// kills first (they explain any status), then the adapter's structured
// event, then the exit status, then known error texts; anything unexplained
// is a crash, which stops the search, because guessing "too large" for a
// broken command would make the answer wrong.
func Classify(in Input) Result {
	if in.Canceled {
		return Result{Outcome: Canceled, Reason: "canceled"}
	}
	if in.TimedOut {
		return Result{Outcome: Timeout, Reason: "timed out; its process group was killed"}
	}
	if r, ok := adapterOOM(in); ok {
		return r
	}
	found := in.Matches
	if found == nil {
		found = Scan(in.Output)
	}
	if in.ExitCode == 0 && in.Signal == 0 {
		return exitedZero(in, found)
	}
	return failed(in, found)
}

// exception is the first line of the exception the adapter saw end the
// program, or "".
func exception(in Input) string {
	if in.Event == nil {
		return ""
	}
	return firstLine(in.Event.Exception)
}

// adapterOOM reads the adapter's event: an OOM that ended the program, or
// OOMs the program caught (to skip the batch, or to exit with its own
// status), which mean it did not fit either.
func adapterOOM(in Input) (Result, bool) {
	if in.Event == nil {
		return Result{}, false
	}
	if in.Event.OOM {
		e := exception(in)
		if e == "" {
			e = "torch.OutOfMemoryError"
		}
		return Result{Outcome: OOM, Reason: shorten(e) + " (adapter)", Signature: "adapter"}, true
	}
	if n := in.Event.OOMsCaught; n > 0 {
		what := "OOM caught by the program"
		if n > 1 {
			what = fmt.Sprintf("%d OOMs caught by the program", n)
		}
		return Result{Outcome: OOM, Reason: what + ", " + describeStatus(in.ExitCode, in.Signal), Signature: "adapter"}, true
	}
	return Result{}, false
}

// exitedZero judges a trial that exited 0: it fits, unless its output
// shows a GPU OOM that the program survived.
func exitedZero(in Input, found *Matches) Result {
	if r, ok := caughtOOM(found); ok {
		return r
	}
	// The adapter ended the program after its --steps steps: the trial ran
	// them all. A process tree that still failed (a launcher's status,
	// another rank's crash) is judged as any failure.
	if in.Event != nil && in.Event.Stopped {
		return Result{Outcome: OK, Reason: stoppedReason(in.Event.Steps)}
	}
	return Result{Outcome: OK, Reason: "exit status 0"}
}

// failed judges a trial that exited with a failure status or a signal:
// a kernel OOM kill, else the error texts, else a crash.
func failed(in Input, found *Matches) Result {
	status := describeStatus(in.ExitCode, in.Signal)
	// A shell that runs the trainer as a child reports the child's SIGKILL
	// as exit status 137; treat it like a SIGKILL of the leader.
	sigkilled := in.Signal == syscall.SIGKILL || (in.Signal == 0 && in.ExitCode == 128+int(syscall.SIGKILL))
	if sigkilled && in.HostOOMEvidence {
		return Result{Outcome: HostOOM, Reason: status + " (kernel OOM kill)", Signature: "oom_kill"}
	}
	// The adapter's exception is the one that ended the program, so it is
	// read before the output, where earlier (caught) errors may also show.
	var fallback *Result
	for _, m := range []*Matches{Scan([]byte(exception(in))), found} {
		r, weak, ok := decide(m, in.HostOOMEvidence)
		if !ok {
			continue
		}
		if !weak {
			return r
		}
		if fallback == nil {
			fallback = &r
		}
	}
	if fallback != nil {
		return *fallback
	}
	reason := status
	switch {
	case sigkilled:
		reason += " (not sent by batchfit; no OOM kill recorded)"
	case in.HostOOMEvidence:
		reason += " (an OOM kill was recorded during the trial)"
	}
	if e := exception(in); e != "" {
		reason += ": " + e
	}
	return Result{Outcome: Crash, Reason: shorten(reason)}
}

// decide reads the first signature in table order that m holds. A "was
// killed" signature without evidence comes back as a weak crash: a better
// explanation elsewhere may still win over it.
func decide(m *Matches, evidence bool) (r Result, weak, ok bool) {
	s, line, ok := m.first(nil)
	if !ok {
		return Result{}, false, false
	}
	if s.killed && !evidence {
		return Result{Outcome: Crash, Reason: line + " (no OOM kill recorded)", Signature: s.name}, true, true
	}
	return Result{Outcome: s.outcome, Reason: line, Signature: s.name}, false, true
}

// caughtOOM classifies a trial that exited 0 by its output: one that printed
// a GPU OOM in an error's form ran out of memory and carried on (it caught
// the error, skipped the batch, retried smaller), so it does not fit. A
// line that only mentions the words (a note that an OOM may follow, a
// start-up tip, a config value) does not count: the program ran and said
// nothing failed. The usual priority holds (an OOM beside an illegal
// access is a symptom, and the trial stays ok); texts that libraries also
// log when they recover at a size that fits (failedOnly) are passed over.
func caughtOOM(m *Matches) (Result, bool) {
	s, line, ok := m.firstError(func(s *signature) bool { return s.failedOnly })
	if !ok || s.outcome != OOM {
		return Result{}, false
	}
	// The fact first: a display that clips the reason still shows why a
	// trial that exited 0 does not fit.
	return Result{Outcome: OOM, Reason: "OOM in the output, exit 0: " + line, Signature: s.name}, true
}

func stoppedReason(steps int) string {
	if steps == 1 {
		return "stopped after 1 step"
	}
	return fmt.Sprintf("stopped after %d steps", steps)
}

func describeStatus(code int, sig syscall.Signal) string {
	if sig != 0 {
		name := unix.SignalName(sig)
		if name == "" {
			name = sig.String()
		}
		return "killed by " + name
	}
	return fmt.Sprintf("exit status %d", code)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// shorten makes s one clean line (termtext.Line: no control sequences,
// which a reason shown on a terminal must not carry) and cuts it to
// maxReason bytes on a rune boundary.
func shorten(s string) string {
	s = termtext.Line(s, 0)
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
