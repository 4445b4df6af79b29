package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
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

// TestSummaryShowsTheHeadroom: beside the maximum, the largest size that
// leaves 5 % free (or the --margin share), said honestly when the run
// cannot know it.
func TestSummaryShowsTheHeadroom(t *testing.T) {
	const gib = 1 << 30
	found := func() *record.Run {
		return &record.Run{Status: record.Found, Answer: 99, FirstFailure: 100, Settings: record.Settings{Min: 1, MultipleOf: 1},
			GPU: &record.GPUInfo{Capacity: 100 * gib},
			Trials: []record.Trial{
				{N: 1, Size: 64, Outcome: classify.OK, Allocated: 64 * gib},
				{N: 2, Size: 99, Outcome: classify.OK, Allocated: 99 * gib},
				{N: 3, Size: 100, Outcome: classify.OOM},
			}}
	}
	measured := found()
	measured.Trials = append(measured.Trials, record.Trial{N: 4, Size: 95, Outcome: classify.OK, Allocated: 95 * gib},
		record.Trial{N: 5, Size: 96, Outcome: classify.OK, Allocated: 96 * gib})
	modelled := found()
	modelled.Model = &record.Model{Figure: "allocated", Intercept: 0.5 * gib, Slope: gib}
	noFigures := found()
	for i := range noFigures.Trials {
		noFigures.Trials[i].Allocated = 0
	}
	margin := found()
	margin.Settings.Margin, margin.Margin = 10, 90
	nothing := &record.Run{Status: record.NothingFits, Trials: []record.Trial{{N: 1, Size: 1, Outcome: classify.OOM}}}
	tests := []struct {
		name string
		run  *record.Run
		want string
	}{
		{"measured", measured, "  with 5 % of memory free: 95\n"},
		{"modelled", modelled, "  with 5 % of memory free: 94 (predicted by the memory model; --margin 5% measures it)\n"},
		{"no memory figures", noFigures, "  with 5 % of memory free: unknown (no memory figures)\n"},
		{"--margin", margin, "  with 10 % of memory free: 90\n"},
		{"nothing fits", nothing, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteSummaryHead(&b, tc.run); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if tc.want == "" {
				if strings.Contains(out, "memory free") {
					t.Errorf("summary of a run without an answer shows a margin:\n%s", out)
				}
				return
			}
			if !strings.Contains(out, tc.want) || strings.Count(out, "memory free") != 1 {
				t.Errorf("summary lacks %q, once:\n%s", tc.want, out)
			}
		})
	}
}

// TestSummaryNotExact: an answer that is not exact says so in its proof's
// place, whether the boundary was flaky or its failures put it at risk;
// a conflict below the answer says which sizes.
func TestSummaryNotExact(t *testing.T) {
	for _, tc := range []struct {
		run  record.Run
		want string
	}{
		{record.Run{Flaky: []record.FlakySize{{Size: 677, OK: 1, Failed: 2}}},
			"  not exact: the boundary is flaky (677 ran 1 time and failed 2 times); 676 is the safe side, it ran every time\n"},
		{record.Run{AtRisk: &record.Risk{Size: 672, From: 677}},
			"  not exact: by its failures' own figures sizes from 672 up can fail; 676 is the safe side, it ran every time\n"},
		{record.Run{NonMonotonic: []record.Pair{{OK: 67, Fail: 61}}},
			"  non-monotonic: 61 failed below 67, which ran, both twice; a size below the answer may fail\n"},
	} {
		run := tc.run
		run.Status, run.Answer, run.FirstFailure = record.Found, 676, 677
		var b bytes.Buffer
		if err := WriteSummary(&b, &run); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("summary lacks %q:\n%s", tc.want, b.String())
		}
	}
}

// TestSummaryShowsTheInputShapes: shapes that varied are said with their
// range, and what the trials did about them.
func TestSummaryShowsTheInputShapes(t *testing.T) {
	batches := func(worst bool, why string) *adapter.Batches {
		return &adapter.Batches{Varied: true, WorstFirst: worst, WhyNot: why,
			Shapes:  []adapter.BatchShape{{"input_ids": {36, 2048}}, {"input_ids": {36, 384}}},
			Largest: adapter.BatchShape{"input_ids": {36, 2048}}}
	}
	for _, tc := range []struct {
		name    string
		b       *adapter.Batches
		want    string
		notWant string
	}{
		{"worst first", batches(true, ""), "  input shapes varied (input_ids length 384–2048): trials ran the largest batches first\n", "warning:"},
		{"iterable", batches(false, "iterable dataset"), "  warning: input shapes varied (input_ids 36x384 … 36x2048) and trials could not run the largest batches first (iterable dataset)", "trials ran the largest"},
		{"fixed", &adapter.Batches{Shapes: []adapter.BatchShape{{"x": {36}}}}, "trials: 1", "input shapes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := &record.Run{Status: record.Found, Answer: 36, FirstFailure: 37,
				Trials: []record.Trial{{N: 1, Size: 36, Outcome: classify.OK, Batches: tc.b}}}
			run.InputShapes = record.InputShapesOf(run.Trials, run.Answer)
			if w := run.InputShapes.Warning(); w != "" {
				run.Warnings = append(run.Warnings, w)
			}
			var b bytes.Buffer
			if err := WriteSummaryHead(&b, run); err != nil {
				t.Fatal(err)
			}
			if out := b.String(); !strings.Contains(out, tc.want) || strings.Contains(out, tc.notWant) {
				t.Errorf("summary, want %q and not %q:\n%s", tc.want, tc.notWant, out)
			}
		})
	}
}
