package classify

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
)

// TestCorpus classifies every real error text in testdata/corpus as the
// output of a trial that exited with status 1, or 0 for a name with
// "-exit0-" in it. The file name says the expected outcome:
// "<outcome>-<what>.txt".
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 25 {
		t.Fatalf("corpus has %d files, want at least 25", len(files))
	}
	seen := map[Outcome]int{}
	for _, f := range files {
		name := filepath.Base(f)
		want := Outcome(name[:strings.IndexByte(name, '-')])
		if !want.Valid() {
			t.Fatalf("%s: file name does not start with an outcome", name)
		}
		seen[want]++
		t.Run(strings.TrimSuffix(name, ".txt"), func(t *testing.T) {
			out, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			exit := 1
			if strings.Contains(name, "-exit0-") {
				exit = 0
			}
			got := Classify(Input{ExitCode: exit, Output: out})
			if got.Outcome != want {
				t.Fatalf("Classify = %s (%s, signature %q), want %s", got.Outcome, got.Reason, got.Signature, want)
			}
			if got.Reason == "" {
				t.Error("empty reason")
			}
			if len(got.Reason) > maxReason+2*len("…")+len("OOM in the output, exit 0: ") {
				t.Errorf("reason is %d bytes long", len(got.Reason))
			}
		})
	}
	for _, o := range []Outcome{OOM, HostOOM, SizeLimit, Crash} {
		if seen[o] == 0 {
			t.Errorf("corpus has no %s sample", o)
		}
	}
}

func TestClassifyOrder(t *testing.T) {
	oom := []byte("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.70 GiB of which 1.08 GiB is free.")
	tests := []struct {
		name   string
		in     Input
		want   Outcome
		reason string // substring of Reason
	}{
		{"canceled beats everything", Input{Canceled: true, TimedOut: true, Signal: syscall.SIGKILL, Output: oom}, Canceled, "canceled"},
		{"timeout beats output", Input{TimedOut: true, Signal: syscall.SIGTERM, Output: oom}, Timeout, "timed out"},
		{"adapter OOM", Input{ExitCode: 1, Event: &adapter.Event{OOM: true}}, OOM, "torch.OutOfMemoryError (adapter)"},
		{"adapter OOM with its exception", Input{ExitCode: 1, Event: &adapter.Event{OOM: true, Exception: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\nmore"}}, OOM, "Tried to allocate 1.00 GiB (adapter)"},
		{"exit 0 with OOM text is an OOM caught by the program", Input{ExitCode: 0, Output: oom}, OOM, "OOM in the output, exit 0: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."},
		{"exit 0 with an XLA autotuner warning is ok", Input{ExitCode: 0, Output: []byte("Profiling failure on cuDNN engine eng1{k2=4,k3=0}: UNKNOWN: CUDNN_STATUS_ALLOC_FAILED\n")}, OK, "exit status 0"},
		{"exit 0 with an illegal access beside the OOM is ok", Input{ExitCode: 0, Output: append([]byte("RuntimeError: CUDA error: an illegal memory access was encountered\n"), oom...)}, OK, "exit status 0"},
		{"exit 0 with an OOM only mentioned is ok", Input{ExitCode: 0, Output: []byte("note: large batch; a CUDA out of memory. error may follow\n")}, OK, "exit status 0"},
		{"exit 0: the error's line wins over a later mention", Input{ExitCode: 0, Output: append(append([]byte{}, oom...), "\nnote: a CUDA out of memory. error may follow\n"...)}, OOM, "exit 0: torch.OutOfMemoryError"},
		{"exit 0 with a status line", Input{ExitCode: 0, Output: []byte("kernels.cu:88: CUBLAS_STATUS_ALLOC_FAILED\n")}, OOM, "CUBLAS_STATUS_ALLOC_FAILED"},
		{"exit 0 with the allocator's figures deep in a long line", Input{ExitCode: 0, Output: []byte(strings.Repeat("x", 40<<10) + " CUDA out of memory. Tried to allocate 2.00 GiB\n")}, OOM, "Tried to allocate 2.00 GiB"},
		{"exit 0 with an OOM mentioned deep in a long line is ok", Input{ExitCode: 0, Output: []byte(strings.Repeat("x", 40<<10) + " a CUDA out of memory. may follow\n")}, OK, "exit status 0"},
		{"exit 1 with an OOM only mentioned is still an OOM", Input{ExitCode: 1, Output: []byte("note: a CUDA out of memory. error may follow\n")}, OOM, "note: a CUDA out of memory."},
		{"exit 0 with host OOM text is ok", Input{ExitCode: 0, Output: []byte("MemoryError\n")}, OK, "exit status 0"},
		{"exit 0 with matches from a scanner", Input{ExitCode: 0, Output: []byte("no OOM in the tail\n"), Matches: Scan(oom)}, OOM, "OOM in the output, exit 0: torch.OutOfMemoryError"},
		{"matches from a scanner win over Output", Input{ExitCode: 1, Output: oom, Matches: Scan([]byte("KeyError: 'label'\n"))}, Crash, "exit status 1"},
		{"exit 0 with adapter event without OOM", Input{Event: &adapter.Event{MaxAllocated: 1}}, OK, "exit status 0"},
		{"SIGKILL with evidence", Input{ExitCode: -1, Signal: syscall.SIGKILL, HostOOMEvidence: true}, HostOOM, "killed by SIGKILL (kernel OOM kill)"},
		{"SIGKILL without evidence", Input{ExitCode: -1, Signal: syscall.SIGKILL}, Crash, "killed by SIGKILL (not sent by batchfit; no OOM kill recorded)"},
		{"shell's 137 with evidence", Input{ExitCode: 137, HostOOMEvidence: true}, HostOOM, "exit status 137 (kernel OOM kill)"},
		{"shell's 137 without evidence", Input{ExitCode: 137}, Crash, "exit status 137 (not sent"},
		{"SIGKILL without evidence but OOM text", Input{ExitCode: -1, Signal: syscall.SIGKILL, Output: oom}, OOM, "CUDA out of memory"},
		{"segfault", Input{ExitCode: -1, Signal: syscall.SIGSEGV}, Crash, "killed by SIGSEGV"},
		{"abort after bad_alloc", Input{ExitCode: -1, Signal: syscall.SIGABRT, Output: []byte("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n")}, HostOOM, "std::bad_alloc"},
		{"plain exit status", Input{ExitCode: 3, Output: []byte("usage: train.py [-h]\ntrain.py: error: unrecognized arguments: --bs\n")}, Crash, "exit status 3"},
		{"plain exit with adapter exception", Input{ExitCode: 1, Event: &adapter.Event{Exception: "KeyError: 'label'"}}, Crash, "exit status 1: KeyError: 'label'"},
		{"evidence explains an unknown failure only in words", Input{ExitCode: 1, HostOOMEvidence: true}, Crash, "an OOM kill was recorded"},
		{"DataLoader worker killed with evidence", Input{ExitCode: 1, HostOOMEvidence: true, Output: []byte("RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.\n")}, HostOOM, "DataLoader worker"},
		{"DataLoader worker killed without evidence", Input{ExitCode: 1, Output: []byte("RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.\n")}, Crash, "(no OOM kill recorded)"},
		{"torchrun child SIGKILL with evidence", Input{ExitCode: 1, HostOOMEvidence: true, Output: []byte("  exitcode  : -9 (pid: 4078)\n  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 4078\n")}, HostOOM, "Signal 9 (SIGKILL)"},
		{"dash prints a bare Killed", Input{ExitCode: 137, Output: []byte("step 1\nKilled\n")}, Crash, "Killed (no OOM kill recorded)"},
		{"a weak kill loses to a real signature", Input{ExitCode: 1, Output: append([]byte("Killed\n"), oom...)}, OOM, "CUDA out of memory"},
		{"adapter exception beats caught OOM text in output", Input{ExitCode: 1, Output: oom, Event: &adapter.Event{Exception: "RuntimeError: CUDA error: an illegal memory access was encountered"}}, Crash, "illegal memory access"},
		{"unmatched adapter exception falls back to output", Input{ExitCode: 1, Output: oom, Event: &adapter.Event{Exception: "torch.distributed.DistBackendError: NCCL communicator was aborted"}}, OOM, "CUDA out of memory"},
		{"illegal access beats generic OOM in the same text", Input{ExitCode: 1, Output: []byte("RuntimeError: CUDA error: out of memory\nRuntimeError: CUDA error: an illegal memory access was encountered\n")}, Crash, "illegal memory access"},
		{"CUDA error: out of memory is OOM", Input{ExitCode: 1, Output: []byte("RuntimeError: CUDA error: out of memory\n")}, OOM, "CUDA error: out of memory"},
		{"rank-prefixed MemoryError", Input{ExitCode: 1, Output: []byte("[rank0]: MemoryError\n")}, HostOOM, "MemoryError"},
		{"MemoryError inside a word is not host OOM", Input{ExitCode: 1, Output: []byte("ValueError: MyMemoryErrorHandler is not configured\n")}, Crash, "exit status 1"},
		{"Killed in prose is not a kill", Input{ExitCode: 1, Output: []byte("Killed 3 stale workers before start\nValueError: bad config\n")}, Crash, "exit status 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.in)
			if got.Outcome != tt.want || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("Classify = %s %q, want %s with %q", got.Outcome, got.Reason, tt.want, tt.reason)
			}
		})
	}
}

func TestReasonIsTheMatchedLine(t *testing.T) {
	out, err := os.ReadFile(filepath.Join("testdata", "corpus", "crash-device-assert.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got := Classify(Input{ExitCode: 1, Output: out})
	if got.Reason != "RuntimeError: CUDA error: device-side assert triggered" || got.Signature != "device-side assert" {
		t.Fatalf("got %+v", got)
	}
}

func TestReasonIsShort(t *testing.T) {
	long := "RuntimeError: CUDA error: device-side assert triggered " + strings.Repeat("é", 300)
	got := Classify(Input{ExitCode: 1, Output: []byte(long)})
	if len(got.Reason) > maxReason+len("…") || !strings.HasSuffix(got.Reason, "…") {
		t.Fatalf("reason of %d bytes: %q", len(got.Reason), got.Reason)
	}
	if !strings.HasPrefix(got.Reason, "RuntimeError: CUDA error: device-side assert") {
		t.Fatalf("reason %q", got.Reason)
	}
}

// TestReasonHasNoControls: a reason is shown on a terminal, so escape
// sequences, control bytes and invalid UTF-8 in the output it quotes do not
// survive into it, whether it comes from a signature, an exception or the
// exit status.
func TestReasonHasNoControls(t *testing.T) {
	for _, in := range []Input{
		{ExitCode: 1, Output: []byte("\x1b[31mRuntimeError: CUDA error: device-side assert triggered\x1b[0m\x07\xff\n")},
		{ExitCode: 0, Output: []byte("\x1b]0;title\x07torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\x1b[K\n")},
		{ExitCode: 1, Event: &adapter.Event{Exception: "ValueError: \x1b[1mbad\x1b[0m\x00\u009b31m value"}},
		{ExitCode: 1, Event: &adapter.Event{OOM: true, Exception: "torch.OutOfMemoryError: \x1b[31mCUDA out of memory\x1b[0m"}},
	} {
		got := Classify(in)
		for _, r := range got.Reason {
			if r < 0x20 || (r >= 0x7f && r < 0xa0) {
				t.Errorf("reason %q keeps control %U", got.Reason, r)
			}
		}
		if strings.Contains(got.Reason, "[31m") || strings.Contains(got.Reason, "title") {
			t.Errorf("reason %q keeps an escape sequence's text", got.Reason)
		}
	}
}

// TestSignaturesHaveSamples keeps the table honest: every entry must be
// exercised by some corpus file or test input above, or it is dead weight.
func TestSignaturesHaveSamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
		all = append(all, '\n')
	}
	// Entries whose only samples live in TestClassifyOrder.
	extra := "Signal 9 (SIGKILL) received by PID 1\n[rank0]: MemoryError\nKilled\n" +
		"CUDA_ERROR_ILLEGAL_ADDRESS\nCUDNN_STATUS_EXECUTION_FAILED\nCUDA error: misaligned address\n" +
		"HIP error: out of memory\nCUDA_ERROR_OUT_OF_MEMORY\nResource exhausted: Out of memory while trying to allocate 24 bytes.\n"
	all = append(all, extra...)
	m := Scan(all)
	for i, s := range signatures {
		if !m.found[i].ok {
			t.Errorf("signature %q (%q %v) has no sample", s.name, s.text, s.re)
		}
	}
}

func TestParseTorchOOM(t *testing.T) {
	const (
		KiB = 1 << 10
		MiB = 1 << 20
		GiB = 1 << 30
	)
	gib := func(v float64) uint64 { return uint64(v*GiB + 0.5) }
	mib := func(v float64) uint64 { return uint64(v*MiB + 0.5) }
	tests := []struct {
		file                  string
		tried, capacity, free uint64
		ok                    bool
	}{
		{"oom-torch-1.0-cached.txt", 32 * MiB, gib(7.79), 21 * MiB, true},
		{"oom-torch-1.8.txt", 20 * MiB, gib(5.80), mib(6.69), true},
		{"oom-torch-1.13.txt", 74 * MiB, gib(11.91), mib(12.94), true},
		{"oom-torch-2.1-capacty.txt", 32 * MiB, 4 * GiB, mib(41.56), true},
		{"oom-torch-2.2.txt", 22 * MiB, gib(23.65), mib(11.06), true},
		{"oom-torch-2.4.txt", gib(22.78), gib(31.47), gib(12.73), true},
		// Captured on an H200 with torch 2.11, once with
		// per_process_memory_fraction set ("6.99 GiB allowed;").
		{"oom-torch-2.11-h200.txt", 200 * GiB, gib(139.80), gib(139.29), true},
		{"oom-torch-2.11-fraction.txt", 2 * GiB, gib(139.80), gib(133.19), true},
		{"oom-torch-rocm-hip.txt", gib(3.31), 128 * GiB, mib(780.24), true},
		{"oom-torchrun-rank.txt", 8 * GiB, gib(79.10), gib(5.12), true},
		// The last message wins: it is the one that ended the program.
		{"oom-torch-chained.txt", 1 * GiB, gib(15.70), 0, true},
		{"oom-mps.txt", 0, 0, 0, false},
		{"oom-cuda-error.txt", 0, 0, 0, false},
		{"crash-keyerror.txt", 0, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", "corpus", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			tried, capacity, free, ok := ParseTorchOOM(out)
			if tried != tt.tried || capacity != tt.capacity || free != tt.free || ok != tt.ok {
				t.Fatalf("ParseTorchOOM = %d, %d, %d, %v; want %d, %d, %d, %v",
					tried, capacity, free, ok, tt.tried, tt.capacity, tt.free, tt.ok)
			}
		})
	}
	t.Run("bytes and KiB", func(t *testing.T) {
		msg := "CUDA out of memory. Tried to allocate 512.00 KiB. GPU 0 has a total capacity of 1024 bytes of which 0 bytes is free."
		tried, capacity, free, ok := ParseTorchOOM([]byte(msg))
		if tried != 512*KiB || capacity != 1024 || free != 0 || !ok {
			t.Fatalf("got %d %d %d %v", tried, capacity, free, ok)
		}
	})
	t.Run("truncated message", func(t *testing.T) {
		if _, _, _, ok := ParseTorchOOM([]byte("CUDA out of memory. Tried to allocate 2.00 GiB")); ok {
			t.Fatal("ok for a message without capacity and free")
		}
	})
}

// A program that catches its own OOM did not fit, whatever its status; the
// adapter counts the OOMs it caught.
func TestClassifyCaughtOOM(t *testing.T) {
	tests := []struct {
		name   string
		in     Input
		want   Outcome
		reason string
	}{
		{"caught, exit 0", Input{Event: &adapter.Event{OOMsCaught: 1}}, OOM, "OOM caught by the program, exit status 0"},
		{"caught, exit 3", Input{ExitCode: 3, Event: &adapter.Event{OOMsCaught: 1}}, OOM, "OOM caught by the program, exit status 3"},
		{"several caught", Input{Event: &adapter.Event{OOMsCaught: 4}}, OOM, "4 OOMs caught by the program, exit status 0"},
		{"caught, then a crash", Input{ExitCode: 1, Event: &adapter.Event{OOMsCaught: 1, Exception: "KeyError: 'label'"}}, OOM, "OOM caught by the program, exit status 1"},
		{"the ending OOM names itself", Input{ExitCode: 1, Event: &adapter.Event{OOM: true, OOMsCaught: 2, Exception: "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory"}}, OOM, "RESOURCE_EXHAUSTED: Out of memory (adapter)"},
		{"a timeout stays a timeout", Input{TimedOut: true, Event: &adapter.Event{OOMsCaught: 1}}, Timeout, "timed out"},
		{"none caught", Input{Event: &adapter.Event{}}, OK, "exit status 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.in)
			if got.Outcome != tt.want || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("Classify = %s %q, want %s with %q", got.Outcome, got.Reason, tt.want, tt.reason)
			}
		})
	}
}
