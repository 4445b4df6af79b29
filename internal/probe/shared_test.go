package probe

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/sim"
	"github.com/batchfit/batchfit/internal/trial"
)

// A trial is shared (shared_gpu) when another of its round ran on the same
// GPUs at the same time: with several capped trials a GPU, interleaved over
// two GPUs, a round of two runs one a GPU and neither is shared; a round of
// three puts two on GPU 0; a round of six, three on each. A round without
// room for all its trials waits for a slot; on distinct GPUs that is never
// sharing.
func TestSharedGPU(t *testing.T) {
	interleaved := [][]int{{0}, {1}, {0}, {1}, {0}, {1}}
	for _, tc := range []struct {
		name   string
		slots  [][]int
		sizes  []int
		shared []int // the sizes that shared a GPU
	}{
		{"one a GPU", interleaved, []int{10, 11}, nil},
		{"two on GPU 0", interleaved, []int{10, 11, 12}, []int{10, 12}},
		{"three a GPU", interleaved, []int{10, 11, 12, 13, 14, 15}, []int{10, 11, 12, 13, 14, 15}},
		{"one GPU, side by side", [][]int{nil, nil, nil}, []int{10, 11}, []int{10, 11}},
		{"more trials than GPUs, one slot each", [][]int{{0}, {1}}, []int{10, 11, 12, 13}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every trial that can start at once waits for the others, so
			// that those on one GPU overlap.
			together := min(len(tc.sizes), len(tc.slots))
			var mu sync.Mutex
			started := 0
			all := make(chan struct{})
			exec := ExecutorFunc(func(ctx context.Context, spec trial.Spec, _ trial.Watcher) (trial.Result, error) {
				mu.Lock()
				if started++; started == together {
					close(all)
				}
				mu.Unlock()
				select {
				case <-all:
				case <-time.After(10 * time.Second):
					return trial.Result{}, fmt.Errorf("only %d of %d trials started together", started, together)
				}
				return trial.Result{Duration: time.Second}, nil
			})
			p := New(Config{Command: []string{"train"}, LogDir: t.TempDir(), Executor: exec, Slots: tc.slots})
			if _, err := p.Probe(context.Background(), search.Request{Sizes: tc.sizes}); err != nil {
				t.Fatal(err)
			}
			var shared []int
			for _, tr := range p.Trials() {
				if tr.SharedGPU {
					shared = append(shared, tr.Size)
				}
			}
			slices.Sort(shared)
			if !slices.Equal(shared, tc.shared) {
				t.Errorf("shared %v, want %v", shared, tc.shared)
			}
		})
	}
}

// The proof's re-checks that ride along a round of new sizes (two GPUs with
// room for three capped trials each) are recorded as re-runs, as the proof's
// own re-check round is, though they run in the round's phase.
func TestRechecksAlongsideAreRetries(t *testing.T) {
	w := sim.ResNet50()
	w.StepSleep = 0
	card := sim.H100()
	fraction := float64(24<<30) / float64(card.Total)
	cfg := search.Config{Min: 1, Max: 65536, MultipleOf: 1, Parallel: 2, SideBySide: 6, ProofAlongside: true}
	res, p, err := simSearch(t, w, card, cfg, fraction)
	if err != nil {
		t.Fatal(err)
	}
	if want := w.TrueMax(card, fraction, 1, 65536, 1); res.Max != want {
		t.Fatalf("answer %d, truth %d", res.Max, want)
	}
	retries, alongside := 0, 0
	for _, o := range res.Trials {
		if o.Retry {
			retries++
		}
	}
	for _, tr := range p.Trials() {
		if !tr.Retry {
			continue
		}
		retries--
		if tr.Phase != string(search.PhaseRecheck) && tr.Phase != string(search.PhaseConfirm) {
			alongside++
		}
	}
	if retries != 0 || alongside == 0 {
		t.Errorf("records and observations differ by %d re-runs; %d ran alongside a round, want some (%v)", retries, alongside, p.Trials())
	}
}

// deltaBackend is a GPU that lists no process (a container's own PID
// namespace, say), so a trial's peak is the rise of its used memory.
type deltaBackend struct {
	mu   sync.Mutex
	used uint64
}

func (b *deltaBackend) Devices() ([]gpu.Device, error) {
	return []gpu.Device{{Index: 0, Name: "fake", Total: 80 << 30}}, nil
}
func (b *deltaBackend) ProcessMemory(int) (map[int]uint64, error) { return map[int]uint64{}, nil }
func (b *deltaBackend) UsedMemory(int) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, nil
}
func (b *deltaBackend) Close() error { return nil }

func (b *deltaBackend) add(n uint64) {
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

var _ gpu.Backend = (*deltaBackend)(nil)

// A trial whose peak is the rise of its GPU's used memory has no figure
// when another trial of the round ran beside it on that GPU: the rise is
// theirs too, and would make the trial seem to hold their memory outside
// its allocator. Alone on its GPU it keeps the figure.
func TestSharedGPUDeviceDelta(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slots [][]int
		sizes []int
		limit uint64 // --memory-limit for the whole process
		want  uint64 // each trial's device figure
		fail  bool   // some trial is held to the limit by the GPU's rise
	}{
		{"alone", [][]int{nil}, []int{10}, 0, 1 << 30, false},
		{"side by side", [][]int{nil, nil}, []int{10, 11}, 0, 0, false},
		// The GPU's rise, the neighbour's gigabyte with it (for a trial
		// that started before the other took its memory), is more than
		// the trial used but still what the limit is held against: a trial
		// is never judged to fit a limit its figures cannot show it kept.
		{"side by side, the rise over the limit", [][]int{nil, nil}, []int{10, 11}, 3 << 29, 0, true},
		{"side by side, the rise under the limit", [][]int{nil, nil}, []int{10, 11}, 3 << 30, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backend := &deltaBackend{}
			var mu sync.Mutex
			started := 0
			all := make(chan struct{})
			exec := ExecutorFunc(func(ctx context.Context, spec trial.Spec, w trial.Watcher) (trial.Result, error) {
				stop := w.Watch(1 << 22)
				defer stop()
				backend.add(1 << 30)
				mu.Lock()
				if started++; started == len(tc.sizes) {
					close(all)
				}
				mu.Unlock()
				<-all
				time.Sleep(50 * time.Millisecond) // the sampler sees every trial's memory
				return trial.Result{Duration: time.Second}, nil
			})
			p := New(Config{Command: []string{"train"}, LogDir: t.TempDir(), Executor: exec, Slots: tc.slots,
				Sampler:     gpu.NewSampler(backend, 5*time.Millisecond),
				MemoryLimit: tc.limit, WholeProcess: tc.limit > 0, DeviceTotal: 8 << 30})
			if _, err := p.Probe(context.Background(), search.Request{Sizes: tc.sizes}); err != nil {
				t.Fatal(err)
			}
			failed := false
			for _, tr := range p.Trials() {
				if tr.Device != tc.want {
					t.Errorf("trial at %d: device %d, want %d", tr.Size, tr.Device, tc.want)
				}
				failed = failed || !tr.Outcome.Fits()
			}
			if failed != tc.fail {
				t.Errorf("a trial failed: %v, want %v (%+v)", failed, tc.fail, p.Trials())
			}
		})
	}
}
