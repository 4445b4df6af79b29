package search

import (
	"context"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

// figuresProber gives every out-of-memory failure the figures fig makes.
type figuresProber struct {
	*fakeProber
	fig func(size, n int) Failure
	n   map[int]int
}

func (f *figuresProber) Probe(ctx context.Context, sizes []int) ([]Observation, error) {
	obs, err := f.fakeProber.Probe(ctx, sizes)
	for i := range obs {
		if obs[i].Outcome == classify.OOM {
			f.n[obs[i].Size]++
			obs[i].Failure = f.fig(obs[i].Size, f.n[obs[i].Size])
		}
	}
	return obs, err
}

// The proof's failing side is believed after two failures when both were
// the same capped allocator state to the byte; a message's rounded figures,
// or figures that differ, take four, as when nothing is known.
func TestRepeatedFailureProves(t *testing.T) {
	w := smallWorkload(100)
	same := func(size, _ int) Failure {
		return Failure{Request: 56 << 20, Allocated: uint64(size) << 24, Reserved: uint64(size)<<24 + 1<<20, Capped: true, Exact: true}
	}
	for _, tc := range []struct {
		name string
		fig  func(size, n int) Failure
		want int
	}{
		{"the same, to the byte", same, 2},
		{"rounded figures from a message", func(size, n int) Failure { f := same(size, n); f.Exact = false; return f }, 4},
		{"not under a cap", func(size, n int) Failure { f := same(size, n); f.Capped = false; return f }, 4},
		{"other figures each time", func(size, n int) Failure { f := same(size, n); f.Reserved += uint64(n); return f }, 4},
	} {
		cfg := Config{Min: 1, Max: 1000, Strategy: Bisect, Capacity: w.capacity}
		// No memory figures: the model cannot rule the failing side out.
		p := &figuresProber{fakeProber: &fakeProber{w: w, only: func(Memory) Memory { return Memory{} }}, fig: tc.fig, n: map[int]int{}}
		res, err := Run(context.Background(), cfg, p)
		if err != nil || res.Max != 100 || res.FirstFailure != 101 {
			t.Fatalf("%s: answer %d/%d, %v", tc.name, res.Max, res.FirstFailure, err)
		}
		if got := p.n[101]; got != tc.want {
			t.Errorf("%s: 101 failed %d times before it was believed, want %d", tc.name, got, tc.want)
		}
	}
}
