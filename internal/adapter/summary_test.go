package adapter

import (
	"fmt"
	"reflect"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []Event
		want   Summary
	}{
		{name: "none", want: Summary{}},
		{
			name:   "no torch",
			events: []Event{{Version: 1, Event: "exit", PID: 1}},
			want:   Summary{Events: 1, Ranks: 1},
		},
		{
			name: "single gpu process",
			events: []Event{{Version: 1, Event: "exit", Torch: "2.11.0", Device: "H200", DeviceTotal: 100,
				MaxAllocated: 10, MaxReserved: 12, Steps: 3, StepTimes: []float64{1, 2}}},
			want: Summary{Events: 1, Torch: "2.11.0", Device: "H200", DeviceTotal: 100, MaxAllocated: 10, MaxReserved: 12,
				Ranks: 1, Steps: 3, StepTimes: []float64{1, 2}},
		},
		{
			name: "ranks: max memory, rank 0 steps, oom exception preferred",
			events: []Event{
				{Version: 1, Event: "exit", Rank: 1, Torch: "2.11.0", Device: "B", DeviceTotal: 200, MaxAllocated: 30, MaxReserved: 31,
					Steps: 2, StepTimes: []float64{9}, Exception: "RuntimeError: peer died"},
				{Version: 1, Event: "exit", Rank: 0, Torch: "2.11.0", Device: "A", DeviceTotal: 100, MaxAllocated: 20, MaxReserved: 40,
					Steps: 3, StepTimes: []float64{1, 2}, Exception: "torch.OutOfMemoryError: CUDA out of memory.", OOM: true},
				{Version: 1, Event: "exit", Rank: 2, Torch: "2.11.0", Device: "C", DeviceTotal: 300, MaxAllocated: 5,
					Exception: "torch.OutOfMemoryError: CUDA out of memory. rank 2", OOM: true},
				{Version: 1, Event: "start", Rank: 7, MaxAllocated: 1000},
			},
			want: Summary{Events: 3, OOM: true, Exception: "torch.OutOfMemoryError: CUDA out of memory.", MaxAllocated: 30, MaxReserved: 40,
				Torch: "2.11.0", Device: "B", DeviceTotal: 200, Ranks: 3, Steps: 3, StepTimes: []float64{1, 2}},
		},
		{
			name: "rank 0 preferred among plain exceptions; first stepper when no rank 0 steps",
			events: []Event{
				{Version: 1, Event: "exit", Rank: 1, Exception: "ValueError: one", Steps: 1},
				{Version: 1, Event: "exit", Rank: 0, Exception: "ValueError: zero"},
				{Version: 1, Event: "exit", Rank: 2, Exception: "ValueError: two", Steps: 5, StepTimes: []float64{1}},
			},
			want: Summary{Events: 3, Exception: "ValueError: zero", Ranks: 3, Steps: 1},
		},
		{
			name: "batches of the stepping rank",
			events: []Event{
				{Version: 1, Event: "exit", Rank: 1, Steps: 2, Batches: &Batches{Source: "forward"}},
				{Version: 1, Event: "exit", Rank: 0, Steps: 2, Batches: &Batches{Source: "dataloader", Varied: true}},
			},
			want: Summary{Events: 2, Ranks: 2, Steps: 2, Batches: &Batches{Source: "dataloader", Varied: true}},
		},
		{
			name: "batches of a process that did not step",
			events: []Event{
				{Version: 1, Event: "exit", PID: 1},
				{Version: 1, Event: "exit", PID: 2, Batches: &Batches{Source: "forward"}},
			},
			want: Summary{Events: 2, Ranks: 1, Batches: &Batches{Source: "forward"}},
		},
		{
			name: "dataloader workers share the rank",
			events: []Event{
				{Version: 1, Event: "exit", PID: 1, Torch: "2.11.0"},
				{Version: 1, Event: "exit", PID: 2, Torch: "2.11.0", Device: "H200", MaxAllocated: 7, Steps: 2, StepTimes: []float64{3}},
			},
			want: Summary{Events: 2, Torch: "2.11.0", Device: "H200", MaxAllocated: 7, Ranks: 1, Steps: 2, StepTimes: []float64{3}},
		},
		{
			name: "jax ranks: largest peak, limit and pool; caught OOMs summed",
			events: []Event{
				{Version: 1, Event: "exit", Rank: 0, Framework: "jax", MaxAllocated: 5, MemoryLimit: 75,
					Devices: []DeviceMemory{{Index: 0, Peak: 5, Limit: 75, Pool: 75}}, OOMsCaught: 1,
					OOMRequests: []OOMRequest{{Device: 0, Bytes: 100}}},
				{Version: 1, Event: "exit", Rank: 1, Framework: "jax", MaxAllocated: 9, MemoryLimit: 70,
					Devices: []DeviceMemory{{Index: 0, Peak: 9, Limit: 70, Pool: 70}, {Index: 1, Peak: 2, Limit: 70, Pool: 80}}, OOMsCaught: 2,
					OOMRequests: []OOMRequest{{Device: 1, Bytes: 200}, {Device: 1, Bytes: 150}}},
				{Version: 1, Event: "exit", Rank: 2},
			},
			want: Summary{Events: 3, Ranks: 3, Framework: "jax", MaxAllocated: 9, MemoryLimit: 75, MaxPool: 80, OOMsCaught: 3,
				OOMRequests: []OOMRequest{{Device: 0, Bytes: 100}, {Device: 1, Bytes: 200}, {Device: 1, Bytes: 150}}},
		},
		{
			name: "the framework with the largest peak; requests bounded",
			events: []Event{
				{Version: 1, Event: "exit", PID: 1, Framework: "tensorflow", MaxAllocated: 3, OOMRequests: make([]OOMRequest, 15)},
				{Version: 1, Event: "exit", PID: 2, Framework: "torch", MaxAllocated: 4, MaxReserved: 4, OOMRequests: make([]OOMRequest, 15)},
			},
			want: Summary{Events: 2, Ranks: 1, Framework: "torch", MaxAllocated: 4, MaxReserved: 4, OOMRequests: make([]OOMRequest, MaxOOMRequests)},
		},
		{
			name: "an OOM ended one process after another caught one",
			events: []Event{
				{Version: 1, Event: "exit", Rank: 0, OOMsCaught: 1},
				{Version: 1, Event: "exit", Rank: 1, OOM: true, Exception: "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor"},
			},
			want: Summary{Events: 2, Ranks: 2, OOM: true, OOMsCaught: 1, Exception: "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor"},
		},
		{
			name: "stopped by the adapter: any rank stopped; step peaks of the rank whose steps count",
			events: []Event{
				{Version: 1, Event: "exit", Rank: 1, Steps: 3, StepTimes: []float64{5, 6}, StepPeaks: []uint64{50, 60, 70}, Stopped: true},
				{Version: 1, Event: "exit", Rank: 0, Steps: 3, StepTimes: []float64{1, 2}, StepPeaks: []uint64{10, 20, 20}},
				{Version: 1, Event: "exit", PID: 9},
			},
			want: Summary{Events: 3, Ranks: 2, Steps: 3, StepTimes: []float64{1, 2}, StepPeaks: []uint64{10, 20, 20}, Stopped: true},
		},
		{
			name: "the size read through batchfit.batch_size() by one process of two",
			events: []Event{
				{Version: 1, Event: "exit", PID: 8},
				{Version: 1, Event: "exit", PID: 9, SizeRead: true},
			},
			want: Summary{Events: 2, Ranks: 1, SizeRead: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Summarize(tc.events); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Summarize =\n%+v, want\n%+v", got, tc.want)
			}
		})
	}
}

// TestSummarizeSources: each path once over every process, bounded.
func TestSummarizeSources(t *testing.T) {
	a := Source{Path: "/w/train.py", Size: 1, MTimeNS: 2}
	b := Source{Path: "/w/model.py", Size: 3, MTimeNS: 4}
	s := Summarize([]Event{
		{Event: "exit", Sources: []Source{a, b}},
		{Event: "exit", Rank: 1, Sources: []Source{a}},
	})
	if len(s.Sources) != 2 || s.Sources[0] != a || s.Sources[1] != b || s.SourcesTruncated {
		t.Fatalf("sources = %+v (truncated %v), want train.py and model.py", s.Sources, s.SourcesTruncated)
	}
	many := make([]Source, MaxSources+1)
	for i := range many {
		many[i].Path = fmt.Sprintf("/w/m%d.py", i)
	}
	s = Summarize([]Event{{Event: "exit", Sources: many}})
	if len(s.Sources) != MaxSources || !s.SourcesTruncated {
		t.Fatalf("%d sources (truncated %v), want %d and truncated", len(s.Sources), s.SourcesTruncated, MaxSources)
	}
}

// TestSummarizeOpened: each path once over every process, the first
// MaxOpened kept and the rest left out, without marking the sources
// truncated (past the bound they are data, not inputs to check).
func TestSummarizeOpened(t *testing.T) {
	conf := Source{Path: "/w/config.json", Size: 1, MTimeNS: 2}
	many := make([]Source, MaxOpened+1)
	for i := range many {
		many[i].Path = fmt.Sprintf("/data/%d.jpg", i)
	}
	s := Summarize([]Event{
		{Event: "exit", Opened: []Source{conf}},
		{Event: "exit", Rank: 1, Opened: append([]Source{conf}, many...)},
	})
	if len(s.Opened) != MaxOpened || s.Opened[0] != conf || s.Opened[1].Path != "/data/0.jpg" || s.SourcesTruncated {
		t.Fatalf("opened = %d files from %+v (sources truncated %v), want %d from config.json", len(s.Opened), s.Opened[0], s.SourcesTruncated, MaxOpened)
	}
}
