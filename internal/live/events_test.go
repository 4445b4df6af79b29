package live

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// Events writes one JSON object a line, each named by "event", a trial with
// the one memory figure the other displays show, and nothing after its end.
func TestEvents(t *testing.T) {
	var buf bytes.Buffer
	e := NewEvents(&buf, Options{Title: "batchfit demo", GPU: "NVIDIA H100", Capacity: 80 << 30, Simulated: true})
	e.Event(search.Event{Kind: search.EventPhase, Phase: search.PhaseBracket})
	e.Event(search.Event{Kind: search.EventPlan, Phase: search.PhaseBracket, Sizes: []int{256}})
	e.Event(search.Event{Kind: search.EventObservation, Phase: search.PhaseBracket})
	e.TrialStarted(1, 256, []int{0})
	e.TrialDone(record.Trial{N: 1, Size: 256, Outcome: classify.OOM, Allocated: 70 << 30})
	e.Event(search.Event{Kind: search.EventBracket, Phase: search.PhaseBracket, Hi: 256})
	e.Warn("the GPU is busy")
	e.Close()
	e.Warn("after the end")
	var kinds []string
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		kinds = append(kinds, ev["event"].(string))
		if ev["event"] == "trial" {
			if ev["memory_text"] != "> 70.00 GiB" || ev["needs_more"] != true || ev["trial"].(map[string]any)["batch_size"] != 256.0 {
				t.Errorf("trial event %v, want batch 256 needing more than 70.00 GiB", ev)
			}
		}
		if ev["event"] == "bracket" && ev["hi"] != 256.0 {
			t.Errorf("bracket event %v, want hi 256", ev)
		}
	}
	want := []string{"start", "phase", "plan", "trial_started", "trial", "bracket", "warning", "end"}
	if len(kinds) != len(want) {
		t.Fatalf("events %q, want %q", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %q, want %q", kinds, want)
		}
	}
}
