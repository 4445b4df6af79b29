package trial

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

// classifyRes classifies a trial's result as internal/probe does.
func classifyRes(res Result) classify.Result {
	return classify.Classify(classify.Input{ExitCode: res.ExitCode, Signal: res.Signal, HostOOMEvidence: res.HostOOMEvidence,
		Output: res.Output(), Matches: res.Matches})
}

// An OOM followed by ~200 KB of other output is an OOM: the whole log is
// searched as the trial writes it, not only its tail.
func TestOOMBuriedInOutput(t *testing.T) {
	t.Parallel()
	res, _ := run(t, context.Background(), "oomburied.sh", "", nil, nil)
	if res.ExitCode != 1 || res.Matches == nil {
		t.Fatalf("result %+v", res)
	}
	if strings.Contains(string(res.StderrTail), "OutOfMemoryError") {
		t.Fatal("the OOM is in the tail; the test no longer shows anything")
	}
	got := classifyRes(res)
	if got.Outcome != classify.OOM || !strings.Contains(got.Reason, "Tried to allocate 8.00 GiB") {
		t.Errorf("classified as %s (%s)", got.Outcome, got.Reason)
	}
}

// A trainer that catches its OOM and exits 0 did not fit either.
func TestOOMCaughtExitZero(t *testing.T) {
	t.Parallel()
	res, _ := run(t, context.Background(), "oomcaught.sh", "", nil, nil)
	if res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	got := classifyRes(res)
	if got.Outcome != classify.OOM || !strings.HasPrefix(got.Reason, "OOM in the output, exit 0: WARNING: skipping batch") {
		t.Errorf("classified as %s (%s)", got.Outcome, got.Reason)
	}
}

// A combined log and temporary logs are searched too.
func TestMatchesOfEveryKindOfLog(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "trial.log")
	for name, spec := range map[string]Spec{
		"combined":  {Argv: []string{"testdata/oom.sh"}, StdoutPath: log, StderrPath: log},
		"temporary": {Argv: []string{"testdata/oom.sh"}},
	} {
		res, err := Run(context.Background(), spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Matches == nil {
			t.Fatalf("%s: no matches", name)
		}
		if got := classify.Classify(classify.Input{ExitCode: 1, Matches: res.Matches}); got.Outcome != classify.OOM {
			t.Errorf("%s: classified as %s (%s)", name, got.Outcome, got.Reason)
		}
	}
}

func TestScanLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "worker.err")
	earlier := "RuntimeError: CUDA error: out of memory\n"
	if err := os.WriteFile(path, []byte(earlier+"KeyError: 'label'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := classify.Classify(classify.Input{ExitCode: 1, Matches: ScanLog(path, 0)}); got.Outcome != classify.OOM {
		t.Errorf("whole log: %s (%s)", got.Outcome, got.Reason)
	}
	// From an offset, what earlier trials wrote does not count.
	if got := classify.Classify(classify.Input{ExitCode: 1, Matches: ScanLog(path, int64(len(earlier)))}); got.Outcome != classify.Crash {
		t.Errorf("from the offset: %s (%s)", got.Outcome, got.Reason)
	}
	if ScanLog(filepath.Join(t.TempDir(), "missing"), 0) != nil {
		t.Error("matches for a missing file")
	}
}
