package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/hold"
	"github.com/batchfit/batchfit/internal/probe"
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

// A held proof that ends because memory could not be held says what to
// do; any other error is left as it is.
func TestHeldProofError(t *testing.T) {
	short := &probe.HoldError{GPU: 0, Err: &hold.ShortError{Free: 20 * gib, Want: 24 * gib}}
	refused := &probe.HoldError{GPU: 1, Err: errors.New("cuMemAlloc of 1048576 bytes: error 2")}
	other := errors.New("trial 9 crashed")
	for _, tc := range []struct {
		err       error
		msg, hint string
	}{
		{short, "another process took memory on the GPU during the search", "search again once the GPU is free"},
		{refused, "hold all but the limit of gpu 1: cuMemAlloc", "search again; the capped trials' answer is in the record, unproven"},
		{other, "trial 9 crashed", ""},
	} {
		err := heldProofError(tc.err)
		if !strings.Contains(err.Error(), tc.msg) || (tc.hint == "") != (hint.Of(err) == "") || !strings.Contains(hint.Of(err), tc.hint) {
			t.Errorf("heldProofError(%v) = %v, hint %q; want %q, hint %q", tc.err, err, hint.Of(err), tc.msg, tc.hint)
		}
	}
}
