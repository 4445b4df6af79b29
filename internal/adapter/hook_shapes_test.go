package adapter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The adapter records each step's batch shapes in the exit event's
// "batches" object, runs a DataLoader's largest batches first where their
// shapes vary, and otherwise runs a varied trial past BATCHFIT_STEPS until
// its largest batch stops growing. These tests run the real hook on
// Debian's CPU torch with testdata/shapestrain.py, whose last batch (4 x 48
// tokens) raises torch's CUDA OOM error, and read the event's raw JSON.

// runRaw runs the program with the hook and returns the run and its one
// exit event as a JSON object.
func runRaw(t *testing.T, python string, env []string, args ...string) (pyRun, map[string]any) {
	t.Helper()
	hooked, report := hookedEnv(t, env)
	r := runPython(t, python, hooked, report, args...)
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("no report: %v; stdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 {
		t.Fatalf("report has %d lines, want 1:\n%s", len(lines), data)
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &ev); err != nil {
		t.Fatal(err)
	}
	return r, ev
}

// batchesOf is the event's "batches" object.
func batchesOf(t *testing.T, ev map[string]any) map[string]any {
	t.Helper()
	b, ok := ev["batches"].(map[string]any)
	if !ok {
		t.Fatalf("event has no batches object: %v", ev)
	}
	return b
}

// shapesJSON is v as compact JSON, for comparing shapes.
func shapesJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestHookRunsWorstBatchesFirst(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	for _, tc := range []struct {
		mode, largest string
	}{
		{"map", `{"batch":[4,48]}`},
		{"lightning", `{"batch":[4,48]}`},
		{"hf", `{"attention_mask":[4,48],"input_ids":[4,48],"labels":[4,48]}`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			// Off, the first three batches are the loader's own, short
			// ones, and the trial stops at 3 steps, its shapes varied.
			r, ev := runRaw(t, py, []string{"BATCHFIT_STEPS=3", "BATCHFIT_WORST_CASE=0"}, testdata("shapestrain.py"), tc.mode)
			b := batchesOf(t, ev)
			if r.code != 0 || ev["stopped"] != true || ev["steps"] != 3.0 {
				t.Fatalf("--worst-case off: exit %d, event %v, want stopped after 3 steps; stderr:\n%s", r.code, ev, r.stderr)
			}
			if b["varied"] != true || b["worst_first"] != false || b["why_not"] != "off" || b["extended_steps"] != 0.0 || len(b["shapes"].([]any)) != 3 {
				t.Errorf("--worst-case off: batches %v, want varied, why_not off, 3 shapes, no extension", b)
			}
			// Step 1 takes the loader's own first batch; the largest comes
			// at step 2 and meets the OOM.
			r, ev = runRaw(t, py, []string{"BATCHFIT_STEPS=3"}, testdata("shapestrain.py"), tc.mode)
			b = batchesOf(t, ev)
			if r.code == 0 || ev["oom"] != true || r.stdout != "step 1 tokens 44\n" {
				t.Errorf("worst first: exit %d, stdout %q, event %v, want the OOM at the second step", r.code, r.stdout, ev)
			}
			if b["worst_first"] != true || b["varied"] != true || shapesJSON(t, b["largest"]) != tc.largest || b["scanned_batches"] != 6.0 {
				t.Errorf("worst first: batches %v, want worst_first, varied, largest %s, 6 batches scanned", b, tc.largest)
			}
			if _, ok := b["scan_seconds"].(float64); !ok {
				t.Errorf("worst first: no scan_seconds in %v", b)
			}
			// Where everything fits, the loader's own first batch runs at
			// step 1 (the optimizer makes its state), the largest at step
			// 2, then the loader's next (a step after them shows whether
			// memory still rises), and the trial stops as always.
			r, ev = runRaw(t, py, []string{"BATCHFIT_STEPS=3", "SHAPES_LIMIT=1000"}, testdata("shapestrain.py"), tc.mode)
			b = batchesOf(t, ev)
			if want := "step 1 tokens 44\nstep 2 tokens 192\n"; r.code != 0 || r.stdout != want || ev["stopped"] != true {
				t.Errorf("fits: exit %d, stdout\n%s\nwant\n%s", r.code, r.stdout, want)
			}
			shapes := b["shapes"].([]any)
			if b["worst_steps"] != 2.0 || len(shapes) != 3 || !strings.Contains(shapesJSON(t, shapes[0]), "[4,11]") ||
				shapesJSON(t, shapes[1]) != tc.largest || !strings.Contains(shapesJSON(t, shapes[2]), "[4,15]") {
				t.Errorf("fits: batches %v, want 2 worst steps: the loader's first, the largest, then the loader's next", b)
			}
		})
	}
}

func TestHookSoakRunsWholeEpochLargestFirst(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	r, ev := runRaw(t, py, []string{SoakEnv + "=1", "SHAPES_LIMIT=1000"}, testdata("shapestrain.py"), "map", "8")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var lengths []int
	for _, s := range batchesOf(t, ev)["shapes"].([]any) {
		dims := s.(map[string]any)["batch"].([]any)
		lengths = append(lengths, int(dims[1].(float64)))
	}
	// The epoch: its own first batch, the largest, then the rest largest
	// first, of its own length (its smallest left out), then the next
	// epoch in its own order.
	if want := []int{11, 48, 27, 23, 19, 15, 11, 15}; !reflect.DeepEqual(lengths, want) {
		t.Errorf("padded lengths by step %v, want %v", lengths, want)
	}
}

func TestHookExtendsVariedTrials(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	for _, tc := range []struct {
		name, mode string
		env        []string
		why, bound string
		oom        bool
		steps      float64 // steps counted, -1 for more than 3 and fewer than 26
		extended   float64 // -1 for steps - 3
	}{
		// Past BATCHFIT_STEPS to the growing batch that does not fit.
		{"no DataLoader meets the OOM", "forward", nil, "no DataLoader", "end", true, 5, 2},
		{"iterable meets the OOM", "iterable", nil, "iterable dataset", "end", true, 5, 2},
		// The validation loader's largest batches ran first; the steps'
		// loader is the iterable one.
		{"iterable after a validation loader", "valfirst", nil, "iterable dataset", "end", true, 5, 2},
		{"no DataLoader after a validation loader", "valforward", nil, "no DataLoader", "end", true, 5, 2},
		{"a scan out of time", "map", []string{"BATCHFIT_SCAN_SECONDS=0.000001"}, "scan timed out after 1e-06 s", "end", true, 5, 2},
		// The largest (step 6's) has not grown for 2 steps at step 8.
		{"patience", "forward", []string{"SHAPES_LIMIT=1000", "BATCHFIT_SHAPE_PATIENCE=2"}, "no DataLoader", "steps", false, 8, 5},
		{"patience, iterable", "iterable", []string{"SHAPES_LIMIT=1000", "BATCHFIT_SHAPE_PATIENCE=2"}, "iterable dataset", "steps", false, 8, 5},
		// 0.1 s at 0.03 s a step: about 4 steps past the third, well
		// before patience would end it (step 26); -1: any count.
		{"time", "forward", []string{"SHAPES_LIMIT=1000", "BATCHFIT_SHAPE_SECONDS=0.1", "SHAPES_SLEEP=0.03"}, "no DataLoader", "time", false, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, ev := runRaw(t, py, append([]string{"BATCHFIT_STEPS=3"}, tc.env...), testdata("shapestrain.py"), tc.mode)
			b := batchesOf(t, ev)
			if n, ok := ev["steps"].(float64); ok && tc.steps < 0 && n > 3 && n < 26 {
				tc.steps, tc.extended = n, n-3
			}
			if (ev["oom"] == true) != tc.oom || ev["steps"] != tc.steps || (ev["stopped"] == true) == tc.oom {
				t.Errorf("exit %d, event %v, want oom %v after %v steps; stderr:\n%s", r.code, ev, tc.oom, tc.steps, r.stderr)
			}
			if b["varied"] != true || b["worst_first"] != false || b["why_not"] != tc.why || b["bound"] != tc.bound || b["extended_steps"] != tc.extended {
				t.Errorf("batches %v, want varied, why_not %q, bound %q, %v extended steps", b, tc.why, tc.bound, tc.extended)
			}
			// The batch the OOM came at is the largest seen, though no
			// counted step consumed it (a DataLoader's: the program fails
			// before its module sees the batch).
			if largest := shapesJSON(t, b["largest"]); tc.oom && !strings.HasSuffix(tc.mode, "forward") && !strings.HasSuffix(largest, `":[4,48]}`) {
				t.Errorf("largest %s, want the 4 x 48 batch", largest)
			}
		})
	}
	// Off, the trial stops at BATCHFIT_STEPS all the same.
	for _, mode := range []string{"forward", "iterable"} {
		r, ev := runRaw(t, py, []string{"BATCHFIT_STEPS=3", "BATCHFIT_WORST_CASE=0"}, testdata("shapestrain.py"), mode)
		if b := batchesOf(t, ev); r.code != 0 || ev["steps"] != 3.0 || b["why_not"] != "off" || b["extended_steps"] != 0.0 || b["bound"] != nil {
			t.Errorf("%s, --worst-case off: exit %d, event %v, want 3 steps, why_not off, no extension", mode, r.code, ev)
		}
	}
}

// A program whose batches all have one shape runs as before: the same
// steps and output, no scan, "varied": false.
func TestHookFixedShapesUnchanged(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	on, ev := runRaw(t, py, []string{"BATCHFIT_STEPS=3"}, testdata("shapestrain.py"), "fixed")
	off, _ := runRaw(t, py, []string{"BATCHFIT_STEPS=3", "BATCHFIT_WORST_CASE=0"}, testdata("shapestrain.py"), "fixed")
	if on.code != 0 || on.stdout != off.stdout || on.stdout != "step 1 tokens 64\nstep 2 tokens 64\n" || ev["steps"] != 3.0 || ev["stopped"] != true {
		t.Errorf("exit %d, stdout\n%s\n(off:\n%s), event %v; want the same 3 steps either way", on.code, on.stdout, off.stdout, ev)
	}
	b := batchesOf(t, ev)
	want := map[string]any{
		"source": "dataloader", "shapes": []any{
			map[string]any{"batch": []any{4.0, 16.0}}, map[string]any{"batch": []any{4.0, 16.0}}, map[string]any{"batch": []any{4.0, 16.0}},
		},
		"largest": map[string]any{"batch": []any{4.0, 16.0}}, "varied": false, "worst_first": false, "worst_steps": 0.0,
		"extended_steps": 0.0, "grew_at_step": 1.0,
	}
	if !reflect.DeepEqual(b, want) {
		t.Errorf("batches =\n%v\nwant\n%v", b, want)
	}
}

// A partial last batch (22 items in batches of 4: 4 x 16 five times, then
// 2 x 16) is no shape of its own: the trial stops at BATCHFIT_STEPS, its
// shapes not varied.
func TestHookFixedShapesPartialBatch(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	r, ev := runRaw(t, py, []string{"BATCHFIT_STEPS=8", "BATCHFIT_BATCH_SIZE=4"}, testdata("shapestrain.py"), "partial")
	b := batchesOf(t, ev)
	if r.code != 0 || ev["steps"] != 8.0 || ev["stopped"] != true {
		t.Fatalf("exit %d, event %v, want stopped after 8 steps; stderr:\n%s", r.code, ev, r.stderr)
	}
	shapes := b["shapes"].([]any)
	if b["varied"] != false || b["extended_steps"] != 0.0 || b["why_not"] != nil || len(shapes) != 8 || shapesJSON(t, shapes[5]) != `{"batch":[2,16]}` {
		t.Errorf("batches %v, want not varied, no extension, the partial batch at step 6", b)
	}
}

// A jitted JAX step's argument shapes, one set per call (a retrace for each
// new length), with the stand-in jax: the parameters, plain numbers, are
// not the batch.
func TestHookJAXBatchShapes(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	fake, err := filepath.Abs(testdata("fakejaxsteps"))
	if err != nil {
		t.Fatal(err)
	}
	r, ev := runRaw(t, py, []string{"PYTHONPATH=" + fake, "BATCHFIT_STEPS=2"}, testdata("fakejaxshapes.py"))
	if r.code != 0 || ev["steps"] != 4.0 || !strings.HasSuffix(r.stdout, "done\n") {
		t.Fatalf("exit %d, stdout %q, event %v, want 4 steps run past BATCHFIT_STEPS to the end", r.code, r.stdout, ev)
	}
	b := batchesOf(t, ev)
	var lengths []float64
	for _, s := range b["shapes"].([]any) {
		m := s.(map[string]any)
		if len(m) != 2 || shapesJSON(t, m["arg2.tokens"]) != shapesJSON(t, m["arg2.mask"]) {
			t.Errorf("shapes %v, want arg2.tokens and arg2.mask alike", m)
		}
		lengths = append(lengths, m["arg2.tokens"].([]any)[1].(float64))
	}
	if !reflect.DeepEqual(lengths, []float64{8, 16, 12, 32}) || b["source"] != "jit" || b["varied"] != true ||
		b["why_not"] != "jax input pipeline" || b["extended_steps"] != 2.0 || b["bound"] != "end" || b["grew_at_step"] != 4.0 {
		t.Errorf("batches %v, want lengths 8 16 12 32 from jit, varied, why_not jax input pipeline, 2 extended steps to the end", b)
	}
}
