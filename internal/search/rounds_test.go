package search

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRoundsSideBySide: where three trials run at once, every round plans
// three sizes (Parallel), and the rounds shrink, the proof's included:
// the first round spreads sizes for the model, and the model's rounds try
// its prediction and the neighbours on both sides, so that one round can
// close the bracket. The proof's rounds are counted apart (ProofRounds),
// and the answer is the exact one, as with a size a round.
func TestRoundsSideBySide(t *testing.T) {
	mean := map[int]float64{}
	for _, k := range []int{1, 3} {
		total, proof, worst, along := 0, 0, 0, 0
		for answer := 100; answer < 400; answer++ {
			r := rand.New(rand.NewPCG(uint64(answer), 11))
			w := withAnswer(24*gib, 512*mib, uint64(1+r.IntN(4))*gib, answer, 0.5)
			cfg := Config{Min: 1, Max: 65536, Parallel: k, SideBySide: k, ProofAlongside: k >= 3, Capacity: w.capacity}
			res, err := Run(context.Background(), cfg, &fakeProber{w: w})
			if err != nil {
				t.Fatalf("k=%d answer %d: %v", k, answer, err)
			}
			checkProof(t, res, cfg, answer)
			if res.ProofRounds > res.Rounds {
				t.Fatalf("k=%d answer %d: %d proof rounds of %d", k, answer, res.ProofRounds, res.Rounds)
			}
			total, proof, worst = total+res.Rounds, proof+res.ProofRounds, max(worst, res.Rounds)
			if res.ProofRounds == 0 {
				along++ // every re-check rode in the search's own rounds
			}
		}

		mean[k] = float64(total) / 300
		t.Logf("k=%d: %.2f rounds on average (%.2f of them the proof's), %d at most; %d proven in the search's own rounds", k, mean[k], float64(proof)/300, worst, along)
	}
	if mean[3] > 0.75*mean[1] {
		t.Errorf("three side by side: %.2f rounds on average, one at a time %.2f: want at most three quarters", mean[3], mean[1])
	}
}

// TestRoundsCountTurns: a Probe call of more sizes than run at once takes
// as many rounds as turns, and Settle's are all the proof's.
func TestRoundsCountTurns(t *testing.T) {
	w := withAnswer(24*gib, 512*mib, 2*gib, 276, 0.5)
	cfg := Config{Min: 1, Max: 65536, Capacity: w.capacity}
	st, err := Settle(context.Background(), cfg, &fakeProber{w: w}, 276, 277)
	if err != nil {
		t.Fatal(err)
	}
	// One at a time: 276 and 277, then 276 again and 277 as often as
	// the proof asks, a round each.
	if st.Rounds != len(st.Trials) {
		t.Errorf("%d rounds for %d trials run one at a time", st.Rounds, len(st.Trials))
	}
	res, err := Run(context.Background(), cfg, &fakeProber{w: w})
	if err != nil {
		t.Fatal(err)
	}
	if res.ProofRounds == 0 || res.ProofRounds >= res.Rounds {
		t.Errorf("%d proof rounds of %d: want the proof pair's re-checks apart from the search's", res.ProofRounds, res.Rounds)
	}
}

// TestProofAlongsideFullRounds: a planner that fills every slot leaves no
// room for the proof's re-checks, but one that plans fewer sizes than run
// at once (bisection's last rounds, when fewer sizes are left in the
// bracket than slots) carries them, and such a search is proven without a
// round of its own.
func TestProofAlongsideFullRounds(t *testing.T) {
	along := 0
	for answer := 100; answer < 200; answer++ {
		w := withAnswer(24*gib, 512*mib, 2*gib, answer, 0.5)
		cfg := Config{Min: 1, Max: 65536, Parallel: 3, SideBySide: 3, ProofAlongside: true, Strategy: Bisect, Capacity: w.capacity}
		res, err := Run(context.Background(), cfg, &fakeProber{w: w})
		if err != nil {
			t.Fatalf("answer %d: %v", answer, err)
		}
		checkProof(t, res, cfg, answer)
		if res.ProofRounds == 0 {
			along++
		}
	}
	if along == 0 {
		t.Error("no search was proven in its own rounds")
	}
	t.Logf("%d of 100 proven in the search's own rounds", along)
}

// TestProofBesideReruns: a round's surprising failure runs again before it
// moves the boundary; with trials side by side, the proof's re-check of the
// pair that re-run closes on rides beside it (besideReruns) rather than in
// a round of its own. The HF Trainer's H200 trials: 72 fails below the
// model's clear room, its re-run closes [71, 72], and 71's second run goes
// with it.
func TestProofBesideReruns(t *testing.T) {
	c := hfH200Curve()
	cfg := Config{Min: 1, Max: 1 << 16, Capacity: 24 * gib, AllocatorCap: true, Parallel: 3, SideBySide: 3, ProofAlongside: true}
	res, err := Run(context.Background(), cfg, c.prober())
	if err != nil {
		t.Fatal(err)
	}
	checkProof(t, res, cfg, c.answer)
	beside := false
	for i := 1; i < len(res.Trials); i++ {
		a, b := res.Trials[i-1], res.Trials[i]
		if a.Size == c.answer+1 && b.Size == c.answer && a.Retry && b.Retry {
			beside = true
		}
	}
	if !beside || res.ProofRounds != 0 {
		t.Errorf("trials %v, %d proof rounds: want %d's re-run and %d's second run in one round, no proof round",
			sizesOf(res.Trials), res.ProofRounds, c.answer+1, c.answer)
	}
}

// TestRoundsFromAGuessedStart: a start that guesses the answer (the user's
// --start, or the history's answer for a changed program) opens with sizes
// around it, so that the sizes below it give the model its line: three
// side by side find the answer in at most three rounds, and in two on
// average, whether the guess is a little low or high. Before, the sizes
// spread up from the start, all but the start failed, and the rounds
// crept down to the boundary from a slope a failure's figures made.
func TestRoundsFromAGuessedStart(t *testing.T) {
	total, n := 0, 0
	for answer := 100; answer < 400; answer += 3 {
		for _, guess := range []float64{0.8, 0.95, 1.1} {
			r := rand.New(rand.NewPCG(uint64(answer), 12))
			w := withAnswer(24*gib, 512*mib, uint64(1+r.IntN(4))*gib, answer, 0.5)
			cfg := Config{Min: 1, Max: 65536, Parallel: 3, SideBySide: 3, ProofAlongside: true, Capacity: w.capacity,
				Start: int(guess * float64(answer))}
			res, err := Run(context.Background(), cfg, &fakeProber{w: w})
			if err != nil {
				t.Fatalf("answer %d, start %d: %v", answer, cfg.Start, err)
			}
			checkProof(t, res, cfg, answer)
			find := res.Rounds - res.ProofRounds
			if find > 3 {
				t.Errorf("answer %d, start %d: %d rounds to find it, want at most 3", answer, cfg.Start, find)
			}
			total, n = total+find, n+1
		}
	}
	if mean := float64(total) / float64(n); mean > 2.5 {
		t.Errorf("%.2f rounds on average to find the answer from a guessed start, want at most 2.5", mean)
	}
}

// TestRoundsWithOneSuccess: when only the opening's smallest size fits,
// the next round measures a second size below it for the slope, in place
// of its largest, rather than trust a line through a failure's figures.
func TestRoundsWithOneSuccess(t *testing.T) {
	w := withAnswer(24*gib, 512*mib, 2*gib, 20, 0.5)
	cfg := Config{Min: 1, Max: 65536, Parallel: 3, SideBySide: 3, Capacity: w.capacity}
	f := &fakeProber{w: w}
	res, err := Run(context.Background(), cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	checkProof(t, res, cfg, 20)
	if len(f.calls) < 2 || !slices.Contains(f.calls[1], 4) {
		t.Errorf("rounds %v: want the second to measure 4, half of the one size that ran (8)", f.calls)
	}
}
