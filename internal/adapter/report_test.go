package adapter

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

func TestAppendRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.jsonl")
	want := []Event{
		{Version: 1, Event: "exit", PID: 10, Rank: 0, Torch: "2.11.0", CUDAInitialized: true, Device: "NVIDIA H200",
			DeviceTotal: 150 << 30, MaxAllocated: 20 << 30, MaxReserved: 22 << 30, Steps: 3, StepTimes: []float64{0.5, 0.25}},
		{Version: 1, Event: "exit", PID: 11, Rank: 1, OOM: true, Exception: "torch.OutOfMemoryError: CUDA out of memory."},
	}
	for _, ev := range want {
		ev.Version = 0 // Append fills it in
		if err := Append(path, ev); err != nil {
			t.Fatal(err)
		}
	}
	got, bad, err := Read(path)
	if err != nil || bad != 0 {
		t.Fatalf("Read: bad %d, err %v", bad, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Read = %+v, want %+v", got, want)
	}
}

// The Python side writes the fields by name; this is one line as it writes
// them, so a renamed tag on either side shows here.
func TestReadPythonLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.jsonl")
	line := `{"version":1,"event":"exit","pid":7,"rank":2,"exception":"RuntimeError: wrapped","oom":true,"torch":"2.11.0+cu130",` +
		`"cuda_initialized":true,"device_index":1,"max_memory_allocated":123,"max_memory_reserved":456,"device":"NVIDIA H200",` +
		`"device_total":789,"steps":2,"step_times":[0.1]}` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	got, bad, err := Read(path)
	if err != nil || bad != 0 || len(got) != 1 {
		t.Fatalf("Read = %v, bad %d, err %v", got, bad, err)
	}
	want := Event{Version: 1, Event: "exit", PID: 7, Rank: 2, Exception: "RuntimeError: wrapped", OOM: true, Torch: "2.11.0+cu130",
		CUDAInitialized: true, DeviceIndex: 1, MaxAllocated: 123, MaxReserved: 456, Device: "NVIDIA H200", DeviceTotal: 789,
		Steps: 2, StepTimes: []float64{0.1}}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("Read = %+v, want %+v", got[0], want)
	}
}

// An event of a program the adapter stopped after its steps, as the hook
// writes it.
func TestReadStoppedLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.jsonl")
	line := `{"version":1,"event":"exit","pid":7,"torch":"2.11.0","steps":3,"step_times":[0.5,0.25],` +
		`"step_peaks":[1000,2000,2000],"stopped":true}` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	got, bad, err := Read(path)
	if err != nil || bad != 0 || len(got) != 1 {
		t.Fatalf("Read = %v, bad %d, err %v", got, bad, err)
	}
	want := Event{Version: 1, Event: "exit", PID: 7, Torch: "2.11.0", Steps: 3, StepTimes: []float64{0.5, 0.25},
		StepPeaks: []uint64{1000, 2000, 2000}, Stopped: true}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("Read = %+v, want %+v", got[0], want)
	}
}

// An event with the batches' shapes, as the hook writes it for a loader
// whose largest batches it ran first.
func TestReadBatchesLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.jsonl")
	line := `{"version":1,"event":"exit","pid":7,"steps":2,"step_peaks":[2000,2000],"batches":{"source":"dataloader",` +
		`"shapes":[{"input_ids":[36,2048],"attention_mask":[36,2048]},{"input_ids":[36,384],"attention_mask":[36,384]}],` +
		`"largest":{"input_ids":[36,2048],"attention_mask":[36,2048]},"varied":true,"worst_first":true,"worst_steps":1,` +
		`"scan_seconds":0.42,"scanned_batches":5000,"extended_steps":0,"grew_at_step":1,"bound":"steps","future_key":1}}` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	got, bad, err := Read(path)
	if err != nil || bad != 0 || len(got) != 1 {
		t.Fatalf("Read = %v, bad %d, err %v", got, bad, err)
	}
	long := BatchShape{"input_ids": {36, 2048}, "attention_mask": {36, 2048}}
	want := &Batches{Source: "dataloader", Shapes: []BatchShape{long, {"input_ids": {36, 384}, "attention_mask": {36, 384}}},
		Largest: long, Varied: true, WorstFirst: true, WorstSteps: 1, ScanSeconds: 0.42, ScannedBatches: 5000, GrewAtStep: 1, Bound: "steps"}
	if !reflect.DeepEqual(got[0].Batches, want) {
		t.Errorf("Batches = %+v, want %+v", got[0].Batches, want)
	}
}

func TestReadBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.jsonl")
	content := `{"version":1,"event":"exit","pid":1}
not json
{"version":0,"event":"exit","pid":2}
{"version":1,"pid":3}

{"version":1,"event":"exit","pid":"four"}
{"version":1,"event":"exit","pid":5`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	got, bad, err := Read(path)
	if len(got) != 1 || got[0].PID != 1 || bad != 5 {
		t.Errorf("Read = %+v with %d bad, want pid 1 and 5 bad (blank lines are not bad)", got, bad)
	}
	// The last line is an event cut short.
	if !errors.Is(err, ErrCutShort) {
		t.Errorf("Read: %v, want %v", err, ErrCutShort)
	}
}

// An event the adapter did not write whole (its disk filled up part way)
// is told from other bad lines: the report lost what it may have said.
func TestReadCutShort(t *testing.T) {
	good := `{"version":1,"event":"exit","pid":1}` + "\n"
	tests := []struct {
		name, content string
		cut           bool
	}{
		{"at the end", good + `{"version":1,"event":"exit","pid":2,"ooms_caught":`, true},
		{"another event after it", `{"version":1,"event":"ex` + good, true},
		{"garbage", good + "{not json\n", false},
		{"an event of another version", good + `{"version":0,"event":"exit"}` + "\n", false},
		{"whole", good, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "report.jsonl")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			events, _, err := Read(path)
			var re *ReportError
			if got := errors.As(err, &re); got != tt.cut || (got && (re.Path != path || re.Err != ErrCutShort)) {
				t.Errorf("Read: %v, want cut short %v", err, tt.cut)
			}
			if len(events) != 1 && tt.name != "another event after it" {
				t.Errorf("events %+v", events)
			}
			if tt.cut {
				if want := "write trial report " + path + ": an event is cut short"; err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
			}
		})
	}
}

func TestParseReportFailure(t *testing.T) {
	tests := []struct {
		line string
		path string
		err  error
	}{
		{ReportFailedPrefix + "No space left on device (errno 28): /logs/trial-003-b128.report.jsonl\n", "/logs/trial-003-b128.report.jsonl", syscall.ENOSPC},
		{ReportFailedPrefix + "Permission denied (errno 13): /a dir: with colons/r.jsonl", "/a dir: with colons/r.jsonl", syscall.EACCES},
		{ReportFailedPrefix + "No space left on device: /logs/r.jsonl", "", nil},
		{"batchfit adapter: something else (errno 28): /x", "", nil},
	}
	for _, tt := range tests {
		e, ok := ParseReportFailure(tt.line)
		if ok != (tt.err != nil) || (ok && (e.Path != tt.path || e.Err != tt.err)) {
			t.Errorf("ParseReportFailure(%q) = %+v, %v; want %s, %v", tt.line, e, ok, tt.path, tt.err)
		}
	}
}

func TestReadMissing(t *testing.T) {
	got, bad, err := Read(filepath.Join(t.TempDir(), "none.jsonl"))
	if got != nil || bad != 0 || err != nil {
		t.Errorf("Read of a missing file = %v, %d, %v; want nothing", got, bad, err)
	}
}
