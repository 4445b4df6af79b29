package classify

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
)

const oomLine = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 1.05 GiB is free."

// feed writes out to a new Scanner in pieces of the sizes next gives.
func feed(out []byte, next func() int) *Matches {
	s := NewScanner()
	for len(out) > 0 {
		n := min(max(next(), 1), len(out))
		if _, err := s.Write(out[:n]); err != nil {
			panic(err)
		}
		out = out[n:]
	}
	return s.Matches()
}

// TestScannerWriteBoundaries: however the output is cut into writes, the
// scanner finds what a scan of the whole finds, with the same lines.
func TestScannerWriteBoundaries(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	for _, f := range files {
		out, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := Scan(out)
		for _, size := range []int{1, 2, 3, 7, 64, 4096, 0} {
			next := func() int { return size }
			if size == 0 {
				next = func() int { return rng.Intn(300) }
			}
			if got := feed(out, next); !reflect.DeepEqual(got, want) {
				t.Errorf("%s in writes of %d bytes: found %v, want %v", filepath.Base(f), size, got.found, want.found)
			}
		}
	}
}

// TestScannerOOMThenNoise is the measured failure: an OOM followed by
// ~200 KB of other ranks' output and shutdown logs fell out of the 64 KiB
// tail and was read as a crash.
func TestScannerOOMThenNoise(t *testing.T) {
	var out bytes.Buffer
	fmt.Fprintf(&out, "[rank1]: %s\n", oomLine)
	for i := 0; out.Len() < 200<<10; i++ {
		fmt.Fprintf(&out, "[rank%d]:[W614 11:07:12.%06d ProcessGroupNCCL.cpp:1250] Warning: process group has NOT been destroyed before we destruct ProcessGroupNCCL\n", i%8, i)
	}
	tail := out.Bytes()[out.Len()-64<<10:]
	if got := Classify(Input{ExitCode: 1, Output: tail}); got.Outcome != Crash {
		t.Fatalf("the tail alone: %s %q; the test no longer shows the failure", got.Outcome, got.Reason)
	}
	got := Classify(Input{ExitCode: 1, Output: tail, Matches: feed(out.Bytes(), func() int { return 4096 })})
	if got.Outcome != OOM || got.Reason != "[rank1]: "+oomLine {
		t.Fatalf("Classify = %s %q, want oom from the first line", got.Outcome, got.Reason)
	}
}

// TestScannerLongLine writes a 100 MB line without a newline, with error
// texts at its start, across a write boundary in its middle, and deep in a
// window: all are found, and the scanner holds no more than maxLine bytes of
// it and allocates nothing while the line runs on without a match.
func TestScannerLongLine(t *testing.T) {
	const chunk = 64 << 10
	noise := bytes.Repeat([]byte("x"), chunk)
	s := NewScanner()
	write := func(b []byte) {
		if _, err := s.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	write([]byte("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. "))
	const total = 100 << 20
	const text = "CUDA error: out of memory"
	for n := 0; n < total; n += chunk {
		if n == total/2 {
			write([]byte(text[:10]))
			write([]byte(text[10:]))
		}
		write(noise)
	}
	if cap(s.line) > maxLine {
		t.Errorf("holds %d bytes of the line, want at most %d", cap(s.line), maxLine)
	}
	if allocs := testing.AllocsPerRun(50, func() { write(noise) }); allocs != 0 {
		t.Errorf("%v allocations per write of a long line", allocs)
	}
	m := s.Matches()
	r, _, _ := decide(m, false)
	if r.Outcome != OOM || !strings.Contains(r.Reason, text) || !strings.HasPrefix(r.Reason, "…") {
		t.Errorf("got %s %q, want oom with %q in it", r.Outcome, r.Reason, text)
	}
	if _, line, ok := m.first(func(s *signature) bool { return s.outcome != SizeLimit }); !ok || !strings.HasPrefix(line, "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.") {
		t.Errorf("the line's start: %v %q", ok, line)
	}
}

// TestScannerMidLine: patterns anchored at a line start do not match in the
// middle of a long line, and a match far into a line is shown from a little
// before it.
func TestScannerMidLine(t *testing.T) {
	long := strings.Repeat("x", 3*maxLine) + " MemoryError"
	if got := Classify(Input{ExitCode: 1, Output: []byte(long + "\n")}); got.Outcome != Crash {
		t.Errorf("MemoryError in the middle of a line: %s %q", got.Outcome, got.Reason)
	}
	deep := strings.Repeat("y", 5000) + " step 7: CUDA error: out of memory " + strings.Repeat("z", 5000)
	got := Classify(Input{ExitCode: 1, Output: []byte(deep)})
	if got.Outcome != OOM || !strings.HasPrefix(got.Reason, "…step 7: CUDA error: out of memory zzz") {
		t.Errorf("deep in a line: %s %q", got.Outcome, got.Reason)
	}
}

func TestScannerLineEnds(t *testing.T) {
	tests := []struct {
		name   string
		in     Input
		want   Outcome
		reason string // the whole Reason
	}{
		{"CRLF", Input{ExitCode: 1, Output: []byte("Traceback (most recent call last):\r\n" + oomLine + "\r\nexiting\r\n")}, OOM, oomLine},
		{"CRLF Killed", Input{ExitCode: 137, HostOOMEvidence: true, Output: []byte("step 1\r\nKilled\r\n")}, HostOOM, "exit status 137 (kernel OOM kill)"},
		{"CRLF Killed from the shell", Input{ExitCode: 1, HostOOMEvidence: true, Output: []byte("./run.sh: line 4: 81234 Killed                  python train.py\r\n")}, HostOOM, "./run.sh: line 4: 81234 Killed                  python train.py"},
		{"CRLF MemoryError", Input{ExitCode: 1, Output: []byte("[rank0]: MemoryError\r\n")}, HostOOM, "[rank0]: MemoryError"},
		{"progress bar redrawn with CR", Input{ExitCode: 1, Output: []byte(" 10%|#         | 10/100\r 11%|#         | 11/100\rMemoryError\n")}, HostOOM, "MemoryError"},
		{"rank prefix", Input{ExitCode: 1, Output: []byte("[rank3]: torch.OutOfMemoryError: HIP out of memory.\n")}, OOM, "[rank3]: torch.OutOfMemoryError: HIP out of memory."},
		{"torchrun default prefix", Input{ExitCode: 1, Output: []byte("[default0]:MemoryError\n")}, HostOOM, "[default0]:MemoryError"},
		{"rank prefix on the exception form", Input{ExitCode: 1, Output: []byte("[rank2]: RuntimeError: CUDA out of memory encountered on a different rank\n")}, OOM, "[rank2]: RuntimeError: CUDA out of memory encountered on a different rank"},
		{"no final newline", Input{ExitCode: 1, Output: []byte("step 3\nRuntimeError: numel: integer multiplication overflow")}, SizeLimit, "RuntimeError: numel: integer multiplication overflow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.in)
			if got.Outcome != tt.want || got.Reason != tt.reason {
				t.Fatalf("Classify = %s %q, want %s %q", got.Outcome, got.Reason, tt.want, tt.reason)
			}
		})
	}
}

// TestScannerLastLine: the reason is the last line that matched the winning
// signature, across writes and across streams merged in order.
func TestScannerLastLine(t *testing.T) {
	first := "RuntimeError: CUDA error: out of memory (step 1)"
	last := "RuntimeError: CUDA error: out of memory (step 2)"
	m := Scan([]byte(first + "\nretrying\n" + last + "\n"))
	if r, _, _ := decide(m, false); r.Reason != last {
		t.Errorf("one stream: %q, want %q", r.Reason, last)
	}
	stderr, stdout := Scan([]byte(last+"\n")), Scan([]byte(first+"\n"))
	if r, _, _ := decide(Merge(stderr, nil, stdout), false); r.Reason != first {
		t.Errorf("merged: %q, want stdout's %q", r.Reason, first)
	}
	if Merge(nil, nil) != nil {
		t.Error("Merge of nothing is not nil")
	}
	// Table order still decides between signatures: an illegal access
	// earlier in the output beats an OOM after it.
	m = Scan([]byte("RuntimeError: CUDA error: an illegal memory access was encountered\n" + oomLine + "\n"))
	if r, _, _ := decide(m, false); r.Outcome != Crash {
		t.Errorf("illegal access then OOM: %s %q", r.Outcome, r.Reason)
	}
}

// TestSignatureLiterals keeps the fast path honest: a line is tried against
// a pattern only if it holds the pattern's literal, so every match of the
// pattern must hold it.
func TestSignatureLiterals(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' || r == '\r' }) {
			for _, s := range signatures {
				if s.re == nil {
					continue
				}
				if s.lit == "" {
					t.Fatalf("signature %q has a pattern and no literal", s.name)
				}
				for _, m := range s.re.FindAllString(line, -1) {
					if !strings.Contains(m, s.lit) {
						t.Errorf("signature %q matches %q without its literal %q", s.name, m, s.lit)
					}
				}
			}
		}
	}
}

// The adapter's word that it could not write its report is found wherever
// it falls in the output and however the output is cut into writes, behind
// a torchrun rank's prefix too, and it survives Merge.
func TestScannerReportLost(t *testing.T) {
	said := "[rank0]: " + adapter.ReportFailedPrefix + "No space left on device (errno 28): /logs/trial-003-b128.report.jsonl"
	out := []byte(strings.Repeat("epoch 0 step 0 loss 6.9082\n", 3000) + "partial progress" + "\n" + said + "\n" + "done\n")
	for _, piece := range []int{1, 7, 4096, len(out)} {
		m := feed(out, func() int { return piece })
		e := m.ReportLost()
		if e == nil || e.Path != "/logs/trial-003-b128.report.jsonl" || !errors.Is(e, syscall.ENOSPC) {
			t.Errorf("pieces of %d: ReportLost() = %v", piece, e)
		}
		if e := Merge(m, Scan([]byte("ok\n"))).ReportLost(); e == nil {
			t.Errorf("pieces of %d: lost by Merge", piece)
		}
	}
	if e := Scan([]byte(oomLine + "\n")).ReportLost(); e != nil {
		t.Errorf("ReportLost() = %v in output that does not say so", e)
	}
	var none *Matches
	if none.ReportLost() != nil {
		t.Error("a nil *Matches lost a report")
	}
}
