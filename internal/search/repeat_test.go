package search

import (
	"context"
	"slices"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

// figuresProber gives every out-of-memory failure the figures fig makes.
type figuresProber struct {
	*fakeProber
	fig func(size, n int) Failure
	n   map[int]int
}

func (f *figuresProber) Probe(ctx context.Context, req Request) ([]Observation, error) {
	obs, err := f.fakeProber.Probe(ctx, req)
	for i := range obs {
		if obs[i].Outcome == classify.OOM {
			f.n[obs[i].Size]++
			obs[i].Failure = f.fig(obs[i].Size, f.n[obs[i].Size])
		}
	}
	return obs, err
}

// The proof's failing side is believed after two failures when both were
// the same allocator state to the byte, the room it had left included (the
// cap's, or the device's free memory on a whole card); a message's rounded
// figures, or figures that differ, take four, as when nothing is known.
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
		{"not under a cap, the device's free memory alike", func(size, n int) Failure {
			f := same(size, n)
			f.Capped, f.Free = false, 5<<20
			return f
		}, 2},
		{"not under a cap, other free memory each time", func(size, n int) Failure {
			f := same(size, n)
			f.Capped, f.Free = false, 5<<20+uint64(n)<<20
			return f
		}, 4},
		{"not under a cap, free memory unknown", func(size, n int) Failure { f := same(size, n); f.Capped = false; return f }, 4},
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

// With room on the GPU for two capped trials, the proof's re-check runs its
// pair side by side; the search before it still plans one size a round.
func TestSideBySideRecheck(t *testing.T) {
	w := smallWorkload(100)
	cfg := Config{Min: 1, Max: 1000, Strategy: Model, Capacity: w.capacity, SideBySide: 2}
	p := &fakeProber{w: w}
	res, err := Run(context.Background(), cfg, p)
	if err != nil || res.Max != 100 {
		t.Fatalf("answer %d, %v", res.Max, err)
	}
	pairs := 0
	for _, call := range p.calls {
		switch len(call) {
		case 1:
		case 2:
			pairs++
		default:
			t.Errorf("a round of %d sizes: %v", len(call), p.calls)
		}
	}
	if pairs != 1 {
		t.Errorf("%d rounds of two, want the re-check's one: %v", pairs, p.calls)
	}
}

// With three trials side by side, a round whose size is the neighbour below
// a failure that missed by less than a sample carries the proof's
// re-checks: a right step is proven in its own round (SimCLR's 282 after
// 283 failed), a wrong one costs trials beside it, never the answer.
func TestProofAlongside(t *testing.T) {
	for _, tt := range replays() {
		cfg := tt.cfg
		cfg.SideBySide, cfg.ProofAlongside = 3, true
		res, err := Run(context.Background(), cfg, tt.c.prober())
		if err != nil {
			t.Fatal(err)
		}
		checkProof(t, res, cfg, tt.c.answer)
		if tt.name != "simclr 24GiB" {
			continue
		}
		if res.Rounds != 4 || !slices.Equal(sizesOf(res.Trials), []int{8, 156, 283, 282, 282, 283}) {
			t.Errorf("simclr: %d rounds %v, want 8, 156, 283, then 282 with its proof in one round", res.Rounds, sizesOf(res.Trials))
		}
	}
}

// With two GPUs of three slots each, a round whose two sizes fill the
// bracket carries the re-checks of every pair it may close: SimCLR's 282
// and 283, between 281 and 284's failure, are proven in the round that
// runs them. A re-check beside it that disagrees with an earlier belief
// (281, which fitted, failing) makes that size flaky, as the proof's own
// re-check would: the answer moves to the safe side below it.
func TestProofAlongsideTwoSizes(t *testing.T) {
	simclr := simclrCurve()
	cfg := Config{Min: 1, Max: 1 << 16, Capacity: 24 * gib, AllocatorCap: true, Parallel: 2, SideBySide: 6, ProofAlongside: true}
	p := &roundsProber{p: simclr.prober()}
	res, err := Run(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	checkProof(t, res, cfg, simclr.answer)
	if want := []int{282, 283, 281, 282, 283, 284}; res.Rounds != 3 || !slices.Equal(p.calls[2], want) {
		t.Errorf("%d rounds %v, want the third %v", res.Rounds, p.calls, want)
	}

	runs := 0
	flaky := ProberFunc(func(ctx context.Context, req Request) ([]Observation, error) {
		obs, err := simclr.prober().Probe(ctx, req)
		for i := range obs {
			if obs[i].Size == 281 {
				if runs++; runs == 2 {
					obs[i] = Observation{Size: 281, Outcome: classify.OOM}
				}
			}
		}
		return obs, err
	})
	res, err = Run(context.Background(), cfg, flaky)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("281 flaky: answer %d, flaky %+v, %v", res.Max, res.Flaky, sizesOf(res.Trials))
	if !res.Found || res.Max >= 281 || len(res.Flaky) == 0 || res.Flaky[0].Size != 281 {
		t.Errorf("answer %d, flaky %+v: want below 281, which is flaky (%v)", res.Max, res.Flaky, sizesOf(res.Trials))
	}
}

// A failure the model did not expect is re-run before it moves the boundary;
// when a re-check beside its round (proofAlongside) already ran that size
// again, that re-run is its re-check, and no round is spent on another.
func TestSurpriseRecheckedAlongside(t *testing.T) {
	w := smallWorkload(100)
	p := &fakeProber{w: w, script: func(size, _ int) (classify.Outcome, bool) {
		return classify.OOM, size == 60 // far below what the model allows
	}}
	cfg := Config{Min: 1, Max: 1000, Capacity: w.capacity, SideBySide: 3, ProofAlongside: true}
	d := newDriver(cfg, p)
	for _, s := range []int{8, 50} {
		d.belief[s] = w.observe(s)
	}
	if clear := d.clearRoom(); clear < 60 {
		t.Fatalf("the model leaves clear room to %d, want 60 inside it", clear)
	}
	if err := d.roundWith(context.Background(), PhaseRefine, []int{60}, 0, []int{60}); err != nil {
		t.Fatal(err)
	}
	if len(p.calls) != 1 || !d.modelDoubted || fits(d.belief[60]) {
		t.Errorf("calls %v, model doubted %v, belief at 60 %v: want one round, the surprise held", p.calls, d.modelDoubted, d.belief[60].Outcome)
	}
}
