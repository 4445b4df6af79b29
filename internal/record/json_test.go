package record

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/gpu"
)

// fullRun is a run with one of every nested value, each left at its zero.
func fullRun() *Run {
	return &Run{
		GPU:          &GPUInfo{Devices: []gpu.Device{{}}},
		GlobalBatch:  &GlobalBatch{},
		Trials:       []Trial{{OOM: &OOMFigures{}, Batches: &adapter.Batches{}, Plan: &adapter.XLAPlan{}}},
		InputShapes:  &InputShapes{Ranges: []ShapeRange{{}}},
		Model:        &Model{},
		Pool:         &Pool{},
		Soaks:        []Soak{{}},
		Inputs:       &Inputs{Files: []File{{}}, Executable: &File{}, Git: &Git{}, Loaded: []File{{}}, Opened: []File{{}}},
		Flaky:        []FlakySize{{}},
		AtRisk:       &Risk{},
		NonMonotonic: []Pair{{}},
		Throughput:   &Throughput{Sizes: []SizeThroughput{{}}},
	}
}

// jsonKeys returns every key of every object in the JSON of v.
func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				keys = append(keys, k)
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(doc)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// structKeys returns the JSON names of the fields of the structs a run is
// made of, "-" left out.
func structKeys() []string {
	var keys []string
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || t == reflect.TypeOf(time.Time{}) {
			return
		}
		seen[t] = true
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			keys = append(keys, name)
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(Run{}))
	walk(reflect.TypeOf(Margin{}))
	slices.Sort(keys)
	return slices.Compact(keys)
}

// TestJSONHasEveryKey: every key of a run and of what it holds is written
// even when its value is empty, so that scripts need not test for it.
func TestJSONHasEveryKey(t *testing.T) {
	got := jsonKeys(t, fullRun())
	for _, k := range append(structKeys(), "samples_per_second", "margins", "ranges") {
		if !slices.Contains(got, k) {
			t.Errorf("the JSON of a run lacks %q", k)
		}
	}
}

// TestJSONEmptyValues: what is not set is null, an empty list [], never
// an empty string, a zero meaning "none" or a missing key.
func TestJSONEmptyValues(t *testing.T) {
	r := &Run{Status: Failed, Trials: []Trial{{N: 1, Size: 8, Outcome: classify.Crash, ExitCode: 1}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal(b, &doc)
	for _, k := range []string{"id", "fingerprint", "finished", "torch", "answer", "first_failure", "recommended",
		"global_batch", "model", "error", "log_dir", "cached_from", "inputs", "gpu"} {
		if v, ok := doc[k]; !ok || v != nil {
			t.Errorf("%s = %v, want null", k, v)
		}
	}
	for _, k := range []string{"non_monotonic", "flaky", "warnings", "soaks", "trials"} {
		if v, ok := doc[k].([]any); !ok || (k != "trials" && len(v) != 0) {
			t.Errorf("%s = %v, want a list", k, doc[k])
		}
	}
	trial := doc["trials"].([]any)[0].(map[string]any)
	for _, k := range []string{"reason", "signal", "phase", "peak_allocated_bytes", "samples_per_second", "worker_pid",
		"retained_bytes", "reset_verified", "stderr_tail"} {
		if v, ok := trial[k]; !ok || v != nil {
			t.Errorf("trial %s = %v, want null", k, v)
		}
	}
	for _, k := range []string{"gpus", "step_seconds", "step_peak_bytes", "foreign_pids"} {
		if v, ok := trial[k].([]any); !ok || len(v) != 0 {
			t.Errorf("trial %s = %v, want []", k, trial[k])
		}
	}
}

func TestJSONSamplesPerSecond(t *testing.T) {
	tr := Trial{N: 1, Size: 100, Outcome: classify.OK, StepTimes: []float64{0.5, 0.25, 0.25}}
	b, _ := json.Marshal(tr)
	var doc map[string]any
	json.Unmarshal(b, &doc)
	if v := doc["samples_per_second"]; v != tr.Throughput() || v != 400.0 {
		t.Errorf("samples_per_second = %v, want %v", v, tr.Throughput())
	}
}

// TestJSONReadsBack: a run reads back as it was written, nil lists and
// the --margin answer included.
func TestJSONReadsBack(t *testing.T) {
	r := &Run{ID: "x", Status: Found, Answer: 90, Margin: 80, Settings: Settings{Margin: 10, Min: 1},
		Trials: []Trial{{N: 1, Size: 90, Outcome: classify.OK, WorkerPID: 7}, {N: 2, Size: 90, Outcome: classify.OK,
			Batches: &adapter.Batches{Source: "dataloader", Shapes: []adapter.BatchShape{{"x": {90, 7}}}, Largest: adapter.BatchShape{"x": {90, 9}}, Varied: true}}},
		InputShapes: &InputShapes{WhyNot: "off", Trial: 2, Ranges: []ShapeRange{{Tensors: []string{"x"}, Smallest: []int{90, 7}, Largest: []int{90, 9}}}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Run
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, r) {
		t.Errorf("read back\n%+v\nwant\n%+v", back, *r)
	}
}

// TestJSONReadsOldRecords: a run as batchfit stored it before every key
// was written (empty values left out, the --margin answer as
// "margin_size") still reads.
func TestJSONReadsOldRecords(t *testing.T) {
	old := `{"id":"1kdvh35m0pcz","status":"found","started":"2026-11-29T10:00:00Z","seconds":12,"command":["python","t.py","{}"],
"dir":"/w","settings":{"min":1,"max":4096,"multiple_of":1,"steps":3,"strategy":"model","timeout_seconds":900,"margin_percent":10},
"batchfit_version":"dev","answer":282,"first_failure":283,"margin_size":250,"trials":[{"n":1,"batch_size":282,"outcome":"ok","seconds":1,"exit_code":0}],"rounds":3}`
	var r Run
	if err := json.Unmarshal([]byte(old), &r); err != nil {
		t.Fatal(err)
	}
	if r.Answer != 282 || r.Margin != 250 || r.Settings.Margin != 10 || len(r.Trials) != 1 || r.Trials[0].GPUs != nil {
		t.Errorf("old record read as %+v", r)
	}
}

// TestJSONDocumented: docs/json.md names every key.
func TestJSONDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range append(jsonKeys(t, fullRun()), "schema_version", "runs", "doctor", "message", "hint", "exit_code") {
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/json.md does not document `%s`", k)
		}
	}
}

// TestJSONInSchema: docs/batchfit.schema.json has every key, and requires
// it.
func TestJSONInSchema(t *testing.T) {
	b, err := os.ReadFile("../../docs/batchfit.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	required := map[string]bool{}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			if r, ok := x["required"].([]any); ok {
				for _, k := range r {
					required[k.(string)] = true
				}
			}
			for _, v := range x {
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(schema)
	for _, k := range jsonKeys(t, fullRun()) {
		if !required[k] {
			t.Errorf("the schema does not require `%s`", k)
		}
	}
}

// TestJSONKeyOrder: keys come in the order of the struct's fields, derived
// ones beside what they derive from, as a person reads a run.
func TestJSONKeyOrder(t *testing.T) {
	b, err := json.Marshal(fullRun())
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	last := -1
	for _, k := range []string{`"id"`, `"status"`, `"settings"`, `"answer"`, `"first_failure"`, `"margins"`,
		`"recommended"`, `"trials"`, `"step_seconds"`, `"samples_per_second"`, `"stderr_tail"`, `"rounds"`, `"inputs"`} {
		i := strings.Index(s, k)
		if i < last {
			t.Errorf("%s comes before the key above it in %s", k, s)
		}
		last = i
	}
}

// TestJSONBatches: a trial's batches have every key, null for what the
// adapter did not say, and the ranges of the tensors that varied.
func TestJSONBatches(t *testing.T) {
	tr := Trial{N: 1, Size: 36, Outcome: classify.OK, Batches: &adapter.Batches{Source: "dataloader", Varied: true, WorstFirst: true, WorstSteps: 1,
		Shapes: []adapter.BatchShape{{"input_ids": {36, 2048}}, {"input_ids": {36, 384}}}, Largest: adapter.BatchShape{"input_ids": {36, 2048}}}}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Batches map[string]json.RawMessage `json:"batches"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"source": `"dataloader"`, "worst_steps": "1", "why_not": "null", "scan_seconds": "null", "bound": "null",
		"shapes":  `[{"input_ids":[36,2048]},{"input_ids":[36,384]}]`,
		"ranges":  `[{"tensors":["input_ids"],"smallest":[36,384],"largest":[36,2048]}]`,
		"largest": `{"input_ids":[36,2048]}`,
	}
	for k, v := range want {
		if got := string(doc.Batches[k]); got != v {
			t.Errorf("batches %s = %s, want %s", k, got, v)
		}
	}
}
