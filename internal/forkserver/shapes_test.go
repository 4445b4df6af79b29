package forkserver

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/trial"
)

// rawBatches is the "batches" object of spec's one exit event, less the
// scan's time, which differs between any two runs.
func rawBatches(t *testing.T, spec trial.Spec) map[string]any {
	t.Helper()
	report, _ := adapter.Lookup(spec.Env, adapter.ReportEnv)
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(data))), &ev); err != nil {
		t.Fatalf("report %q: %v", data, err)
	}
	b, _ := ev["batches"].(map[string]any)
	delete(b, "scan_seconds")
	return b
}

// A forked trial serves a DataLoader's largest batches early and reports
// its batches as a fresh one does, each trial from a state of its own (the
// second forked trial's shapes are its own, not added to the first's).
func TestForkedTrialRunsWorstBatchesFirst(t *testing.T) {
	h := newHarness(t)
	if !hasTorch(h.py) {
		t.Skip("no torch")
	}
	e := h.executor()
	specs := []trial.Spec{twoSteps(h.spec(1, "torchshapes.py")), twoSteps(h.spec(2, "torchshapes.py")), twoSteps(h.spec(3, "torchshapes.py"))}
	fresh := h.run(nil, specs[0])
	want := rawBatches(t, specs[0])
	// Two steps: the loader's own first batch, then the longest.
	if fresh.stdout != "step 0 length 4\n" || want["worst_first"] != true || len(want["shapes"].([]any)) != 2 ||
		want["grew_at_step"] != 2.0 {
		t.Fatalf("fresh trial printed %q, batches %v; want the loader's first, then the longest; stderr:\n%s", fresh.stdout, want, fresh.stderr)
	}
	for _, spec := range specs[1:] {
		forked := h.run(e, spec)
		if !forked.res.Forked || forked.stdout != fresh.stdout {
			t.Errorf("forked %v printed %q, fresh %q: %s", forked.res.Forked, forked.stdout, fresh.stdout, h.notices())
		}
		if got := rawBatches(t, spec); !reflect.DeepEqual(got, want) {
			t.Errorf("forked batches\n%v\nfresh\n%v", got, want)
		}
	}
}
