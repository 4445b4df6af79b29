package classify

import (
	"syscall"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
)

// A trial the adapter stopped after its --steps steps fits; the stop does
// not hide an OOM (caught by the program or not), a failed exit or
// batchfit's own kills.
func TestClassifyStopped(t *testing.T) {
	oom := []byte("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
	for _, tc := range []struct {
		name   string
		in     Input
		want   Outcome
		reason string
	}{
		{"stopped", Input{Event: &adapter.Event{Stopped: true, Steps: 3}}, OK, "stopped after 3 steps"},
		{"stopped after one", Input{Event: &adapter.Event{Stopped: true, Steps: 1}}, OK, "stopped after 1 step"},
		// An OOM the program caught and printed happened all the same: the
		// size does not fit, stopped or not.
		{"stopped, OOM text printed by a caught error", Input{Output: oom, Event: &adapter.Event{Stopped: true, Steps: 3}}, OOM,
			"OOM in the output, exit 0: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."},
		{"stopped after an OOM the program caught", Input{Event: &adapter.Event{Stopped: true, Steps: 3, OOMsCaught: 1}}, OOM,
			"OOM caught by the program, exit status 0"},
		{"one rank stopped, another ran out of memory", Input{ExitCode: 1, Event: &adapter.Event{Stopped: true, Steps: 3, OOM: true}}, OOM, "torch.OutOfMemoryError (adapter)"},
		{"stopped, but the launcher failed", Input{ExitCode: 1, Event: &adapter.Event{Stopped: true, Steps: 3}}, Crash, "exit status 1"},
		{"stopped, but killed", Input{ExitCode: -1, Signal: syscall.SIGSEGV, Event: &adapter.Event{Stopped: true, Steps: 3}}, Crash, "killed by SIGSEGV"},
		{"timed out before the stop", Input{TimedOut: true, Signal: syscall.SIGKILL, Event: &adapter.Event{Stopped: true, Steps: 3}}, Timeout, "timed out; its process group was killed"},
		{"not stopped", Input{Event: &adapter.Event{Steps: 3}}, OK, "exit status 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.in)
			if got.Outcome != tc.want || got.Reason != tc.reason {
				t.Errorf("Classify = %s %q, want %s %q", got.Outcome, got.Reason, tc.want, tc.reason)
			}
		})
	}
}
