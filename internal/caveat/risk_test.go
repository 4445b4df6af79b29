package caveat

import (
	"testing"

	"github.com/batchfit/batchfit/internal/search"
)

func TestRisk(t *testing.T) {
	if w := Risk(search.Result{Max: 676}); w != "" {
		t.Errorf("no risk: %q", w)
	}
	res := search.Result{Max: 671, Risk: &search.Risk{Size: 672, From: 677, Shortfall: 206108098, Slope: 37795078}}
	want := "677 asked for 196.6 MiB more than its pool had free when it failed, at 36.0 MiB a sample: " +
		"sizes from 672 up can fail as 677 did, however often they ran, so 671 is the safe side"
	if w := Risk(res); w != want {
		t.Errorf("got  %q\nwant %q", w, want)
	}
}

func TestEvent(t *testing.T) {
	risk := search.Event{Kind: search.EventRisk, Risk: &search.Risk{Size: 672, From: 677, Shortfall: 206108098, Slope: 37795078}}
	if got, want := Event(risk), "677's failure puts sizes from 672 up at risk (it asked for 196.6 MiB more than its pool had free, "+
		"at 36.0 MiB a sample): the answer will lie below 672, not exact unless a failure below proves the boundary"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	conflict := search.Event{Kind: search.EventConflict, Conflict: search.Conflict{Ok: search.Observation{Size: 67}, Fail: search.Observation{Size: 61}}}
	if got, want := Event(conflict), "not monotone: 61 failed below 67, which ran, both twice: the search goes on above 67"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
