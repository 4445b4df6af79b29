package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
)

// TestTimeoutStale: a run whose proof rests on a timeout answers only a
// search whose timeout is not longer; one whose successes took nearly its
// timeout answers only a search whose timeout they fit in.
func TestTimeoutStale(t *testing.T) {
	trial := func(size int, outcome classify.Outcome, seconds float64, phase string) record.Trial {
		return record.Trial{Size: size, Outcome: outcome, Seconds: seconds, Phase: phase}
	}
	timedOut := []record.Trial{trial(100, classify.OK, 0.5, "bracket"), trial(101, classify.Timeout, 2.1, "refine")}
	oom := []record.Trial{trial(100, classify.OK, 0.5, "bracket"), trial(101, classify.OOM, 0.4, "refine")}
	slow := []record.Trial{trial(100, classify.OK, 90, "bracket"), trial(101, classify.OOM, 0.4, "refine")}
	for _, tc := range []struct {
		name    string
		ran     time.Duration // the cached run's timeout
		trials  []record.Trial
		timeout time.Duration // the new search's
		want    string        // in the reason; "" when the run answers
	}{
		{"a timeout, the same timeout", 2 * time.Second, timedOut, 2 * time.Second, ""},
		{"a timeout, a shorter timeout", 2 * time.Second, timedOut, time.Second, ""},
		{"a timeout, a longer timeout", 2 * time.Second, timedOut, 10 * time.Minute, "a trial at 101 timed out under --timeout 2s, shorter than 10m0s"},
		{"a timeout, no timeout", 2 * time.Second, timedOut, 0, "shorter than no timeout"},
		{"no timeout, a longer timeout", 2 * time.Second, oom, 10 * time.Minute, ""},
		{"a slow success, a longer timeout", 15 * time.Minute, slow, 20 * time.Minute, ""},
		{"a slow success, no timeout", 15 * time.Minute, slow, 0, ""},
		{"a slow success, a shorter timeout", 15 * time.Minute, slow, time.Minute, "a trial at 100 ran for 1m30s, over --timeout 1m0s"},
		{"a slow success, just its time", 15 * time.Minute, slow, 90 * time.Second, "ran for 1m30s"},
		{"a slow soak, a shorter timeout", 15 * time.Minute, append(oom, trial(100, classify.OK, 600, record.PhaseSoak)), time.Minute, ""},
		{"a slow throughput run", 15 * time.Minute, append(oom, trial(100, classify.OK, 600, record.PhaseThroughput)), time.Minute, ""},
		{"a timed-out throughput run", 2 * time.Second, append(oom, trial(100, classify.Timeout, 2, record.PhaseThroughput)), time.Minute, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &record.Run{Trials: tc.trials, Settings: record.Settings{TimeoutSecs: tc.ran.Seconds()}}
			got := timeoutStale(c, tc.timeout)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Errorf("timeoutStale = %q, want %q", got, tc.want)
			}
		})
	}
}
