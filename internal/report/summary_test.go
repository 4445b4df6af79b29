package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
)

func TestSummaryShowsTheSoaks(t *testing.T) {
	peaks := make([]uint64, 312)
	for i := range peaks {
		peaks[i] = 20<<30 + uint64(i)<<20
	}
	run := &record.Run{
		Status: record.Found, Answer: 281, FirstFailure: 282,
		Soaks: []record.Soak{
			{Size: 282, Trial: 9, Limit: 600, Seconds: 300, Outcome: classify.OOM, Steps: 312, StepPeaks: peaks},
			{Size: 281, Trial: 12, Limit: 600, Seconds: 600, Outcome: classify.OK, Steps: 700},
		},
		Warnings: []string{"soaked 10m at 282: out of memory after 312 steps; the answer is now 281"},
	}
	var b bytes.Buffer
	if err := WriteSummary(&b, run); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"soak: soaked 10m at 282: out of memory after 312 steps\n",
		"    peak by step: 1: 20.00 GiB, 63: 20.06 GiB, 125: 20.12 GiB, 187: 20.18 GiB, 249: 20.24 GiB, 312: 20.30 GiB\n",
		"soak: soaked 10m at 281: ran 10m (700 steps)\n",
		"warning: soaked 10m at 282: out of memory after 312 steps; the answer is now 281\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
