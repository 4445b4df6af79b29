package probe

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/trial"
)

// A failed trial's observation carries what its OOM said: the message's
// figures, what the cap or the device left free, and the refused allocation
// from torch's OOM observer where the message has none.
func TestFailureOf(t *testing.T) {
	const (
		gib = 1 << 30
		mib = 1 << 20
	)
	corpus := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "classify", "testdata", "corpus", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	round := func(v float64) uint64 { return uint64(v*gib + 0.5) }
	observed := adapter.OOMRequest{Device: 0, Bytes: 3 * gib, Limit: 24 * gib, Free: 100 * gib}
	mibs := func(v float64) uint64 { return uint64(math.Round(v * mib)) }
	inUse := mibs(268.26) // XLA's pool in use, as its log rounds it
	for _, tc := range []struct {
		name    string
		outcome classify.Outcome
		sum     adapter.Summary
		output  []byte
		want    search.Failure
	}{
		{"the cap less reserved (torch 2.11, a fraction)", classify.OOM, adapter.Summary{}, corpus("oom-torch-2.11-fraction.txt"),
			search.Failure{Request: 2 * gib, Allocated: round(6.03), Reserved: round(6.03) + 768<<10, Free: round(6.99) - round(6.03) - 768<<10, Process: round(6.61), Capped: true}},
		{"the device's free memory on a whole card", classify.OOM, adapter.Summary{}, corpus("oom-torchrun-rank.txt"),
			search.Failure{Request: 8 * gib, Allocated: round(70.01), Reserved: round(70.01) + round(2.44), Free: round(5.12), Process: round(73.97)}},
		{"the exception the adapter reported first", classify.OOM,
			adapter.Summary{Exception: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.76 GiB. GPU 0 has a total capacity of 139.80 GiB of which 100.00 GiB is free. Of the allocated memory 23.43 GiB is allocated by PyTorch, and 96.00 MiB is reserved by PyTorch but unallocated.",
				OOMRequests: []adapter.OOMRequest{{Device: 0, Bytes: 4 * gib, Limit: 24 * gib}}},
			corpus("oom-torchrun-rank.txt"),
			search.Failure{Request: round(4.76), Allocated: round(23.43), Reserved: round(23.43) + 96*mib, Free: 24*gib - round(23.43) - 96*mib, Capped: true}},
		{"the observer's counters, to the byte, over the message's rounded figures", classify.OOM,
			adapter.Summary{Exception: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 56.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 115.16 GiB is free. Including non-PyTorch memory, this process has 24.63 GiB memory in use. 23.90 GiB allowed; Of the allocated memory 23.76 GiB is allocated by PyTorch, and 137.70 MiB is reserved by PyTorch but unallocated.",
				OOMRequests: []adapter.OOMRequest{{Device: 0, Bytes: 58720256, Limit: 25662377164, Free: 123652000000, Allocated: 25511999488, Reserved: 25656361984}}},
			nil,
			search.Failure{Request: 58720256, Allocated: 25511999488, Reserved: 25656361984, Free: round(23.90) - 25656361984, Process: round(24.63), Capped: true, Exact: true}},
		{"the observer's free memory, to the byte, on a whole card", classify.OOM,
			adapter.Summary{Exception: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 404.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 303.12 MiB is free. Of the allocated memory 138.76 GiB is allocated by PyTorch, and 72.81 MiB is reserved by PyTorch but unallocated.",
				OOMRequests: []adapter.OOMRequest{{Device: 0, Bytes: 423624704, Limit: 150109880320, Free: 317849600, Allocated: 148990648832, Reserved: 149066997760}}},
			nil,
			search.Failure{Request: 423624704, Allocated: 148990648832, Reserved: 149066997760, Free: 317849600, Exact: true}},
		{"the observer's counters on a whole card, free memory only the message's, rounded: not to the byte", classify.OOM,
			adapter.Summary{Exception: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 404.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 303.12 MiB is free. Of the allocated memory 138.76 GiB is allocated by PyTorch, and 72.81 MiB is reserved by PyTorch but unallocated.",
				OOMRequests: []adapter.OOMRequest{{Device: 0, Bytes: 423624704, Limit: 150109880320, Allocated: 148990648832, Reserved: 149066997760}}},
			nil,
			search.Failure{Request: 423624704, Allocated: 148990648832, Reserved: 149066997760, Free: mibs(303.12)}},
		{"the observer alone: no reserved figure, free unknown under its cap", classify.OOM,
			adapter.Summary{DeviceTotal: 141 * gib, OOMRequests: []adapter.OOMRequest{observed}}, nil,
			search.Failure{Request: 3 * gib, Capped: true}},
		{"XLA: the request only", classify.OOM, adapter.Summary{}, corpus("oom-jax-xla.txt"), search.Failure{Request: 4770354232}},
		{"XLA: the pool's state the output logged before the exception", classify.OOM,
			adapter.Summary{Exception: "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 24.29GiB with allocator GPU_0_bfc on device 0.",
				OOMRequests: []adapter.OOMRequest{{Device: 0, Bytes: 26081188904}}},
			corpus("oom-jax-bfc-stats-h200.txt"),
			search.Failure{Request: round(24.29), Allocated: inUse, Reserved: inUse, Free: round(23.90) - inUse, Capped: true}},
		{"not an OOM", classify.OK, adapter.Summary{}, corpus("oom-torchrun-rank.txt"), search.Failure{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FailureOf(tc.outcome, tc.sum, tc.output); got != tc.want {
				t.Errorf("FailureOf =\n %+v, want\n %+v", got, tc.want)
			}
		})
	}
}

// The figures reach the search through Probe, from the trial's output.
func TestProbeReportsFailure(t *testing.T) {
	msg, err := os.ReadFile(filepath.Join("..", "classify", "testdata", "corpus", "oom-torch-2.11-fraction.txt"))
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{
		Command: []string{"python3", "train.py", "{}"}, LogDir: t.TempDir(), Framework: adapter.Python{},
		Executor: ExecutorFunc(func(context.Context, trial.Spec, trial.Watcher) (trial.Result, error) {
			return trial.Result{ExitCode: 1, StderrTail: msg}, nil
		}),
	})
	obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{64}})
	if err != nil {
		t.Fatal(err)
	}
	f := obs[0].Failure
	if obs[0].Outcome != classify.OOM || f.Request != 2<<30 || f.Free == 0 {
		t.Errorf("observation %+v, want an OOM that tried 2 GiB with the cap's free memory", obs[0])
	}
	// The record keeps the same figures, for --json and replays.
	want := record.OOMFigures{Request: f.Request, Allocated: f.Allocated, Reserved: f.Reserved, Free: f.Free, Process: f.Process, Capped: f.Capped, Exact: f.Exact}
	if got := p.Trials()[0].OOM; got == nil || *got != want {
		t.Errorf("record's oom %+v, want %+v", got, want)
	}
}

// A warm worker's search numbers its fresh trials among its own: the next
// trial takes the number it is given, and later ones count on from it.
func TestNumberFrom(t *testing.T) {
	p := New(Config{
		Command: []string{"python3", "train.py", "{}"}, LogDir: t.TempDir(), Framework: adapter.Python{},
		Executor: ExecutorFunc(func(context.Context, trial.Spec, trial.Watcher) (trial.Result, error) {
			return trial.Result{}, nil
		}),
	})
	p.NumberFrom(6)
	if _, err := p.Probe(context.Background(), search.Request{Sizes: []int{8, 9}}); err != nil {
		t.Fatal(err)
	}
	if ts := p.Trials(); len(ts) != 2 || ts[0].N != 6 || ts[1].N != 7 {
		t.Errorf("trials %+v, want numbers 6 and 7", ts)
	}
}
