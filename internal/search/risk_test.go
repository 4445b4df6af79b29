package search

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
)

// TestPoolOnePlanNoRisk: a workload whose framework plans its step in a
// pool (XLA's) and plans every size the same way puts no size at risk,
// however its failures miss. Its buffer is its activations plus a part that
// does not grow (temporaries the size of the parameters), so a failure's
// own limit (size × free / request) lies at or above the boundary, and no
// size between that limit and the failure runs; or it grows faster than the
// batch (a contrastive loss's batch × batch logits, up to 30 % of the buffer
// at the boundary), so a far failure's limit lies below the boundary, and
// sizes between it and the failure run. The answer is exact and the
// truth's, with one GPU and with two.
func TestPoolOnePlanNoRisk(t *testing.T) {
	const pool, held = 23.9, 0.26 // GiB, as the H200's JAX trials
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 16))
		free := pool - held
		answer := 40 + r.IntN(2000)
		var fixed, quad float64 // GiB, and GiB a sample squared
		if seed%2 == 0 {
			fixed = r.Float64() * 0.2 * free
		} else {
			quad = r.Float64() * 0.3 * free / float64(answer*answer)
		}
		// Linear per sample, so that the buffer at answer+0.5 is what
		// was free.
		x := float64(answer) + 0.5
		perSample := (free - fixed - quad*x*x) / x
		buffer := func(s int) float64 { return fixed + perSample*float64(s) + quad*float64(s*s) }
		p := ProberFunc(func(_ context.Context, req Request) ([]Observation, error) {
			sizes := req.Sizes
			obs := make([]Observation, len(sizes))
			for i, s := range sizes {
				if s <= answer {
					// XLA rematerialises near its pool: the peak
					// flattens below it.
					peak := min(held+buffer(s), pool-0.05*r.Float64())
					obs[i] = Observation{Size: s, Outcome: classify.OK,
						Memory: Memory{Allocated: gibs(peak), Reserved: gibs(pool), Limit: gibs(pool)}}
					continue
				}
				obs[i] = Observation{Size: s, Outcome: classify.OOM, Failure: Failure{Request: gibs(buffer(s)),
					Allocated: gibs(held), Reserved: gibs(held), Free: gibs(pool - held), Capped: true}}
			}
			return obs, nil
		})
		for _, k := range []int{1, 2} {
			cfg := Config{Min: 1, Max: 1 << 16, Capacity: 24 * gib, AllocatorCap: true, Parallel: k}
			res, err := Run(context.Background(), cfg, p)
			if err != nil {
				t.Fatalf("seed %d k=%d: %v", seed, k, err)
			}
			if !res.Exact() || res.Max != answer || res.Risk != nil {
				t.Errorf("seed %d k=%d: answer %d exact %v risk %+v; want %d exact (trials %v)",
					seed, k, res.Max, res.Exact(), res.Risk, answer, sizesOf(res.Trials))
			}
		}
	}
}
