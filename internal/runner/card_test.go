package runner

import (
	"slices"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/search"
)

// The held proof is given the capped search's successes, and only the
// failures it believed: above its answer, at sizes that never ran.
func TestPrior(t *testing.T) {
	obs := func(size int, o classify.Outcome) search.Observation {
		return search.Observation{Size: size, Outcome: o}
	}
	res := search.Result{Max: 96, FirstFailure: 97, Trials: []search.Observation{
		obs(8, classify.OK),
		obs(64, classify.OOM), // at random: its re-run fitted
		obs(64, classify.OK),
		obs(40, classify.OOM), // below the answer: a conflict set aside
		obs(96, classify.OK),
		obs(97, classify.OOM),
		obs(128, classify.OOM),
		obs(112, classify.Crash),
	}}
	var got []int
	for _, o := range prior(res) {
		got = append(got, o.Size)
	}
	if want := []int{8, 64, 96, 97, 128}; !slices.Equal(got, want) {
		t.Errorf("prior = %v, want %v", got, want)
	}
}
