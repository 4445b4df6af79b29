package runner

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
)

func TestRisingMemoryAtTheAnswerIsSaid(t *testing.T) {
	tr := plain
	tr.rising = true
	f := newFixture(tr)
	f.cfg.LogBase = t.TempDir()
	var alerts []string
	deps := f.deps()
	deps.Alert = func(msg string) { alerts = append(alerts, msg) }
	run, err := Run(context.Background(), f.cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if got := run.RisingAtAnswer(); len(got) == 0 || got[0].Rising != 1<<30 {
		t.Fatalf("rising trials at the answer: %+v", got)
	}
	want := "memory was still rising at the last step of the answer's trials"
	if len(alerts) != 1 || !strings.Contains(alerts[0], want) || !strings.Contains(alerts[0], "--steps") || !strings.Contains(alerts[0], "--soak") {
		t.Errorf("alerts %q", alerts)
	}
	if !slices.ContainsFunc(run.Warnings, func(w string) bool { return strings.Contains(w, want) }) {
		t.Errorf("warnings %q", run.Warnings)
	}

	// Settled memory says nothing.
	f = newFixture(plain)
	f.cfg.LogBase = t.TempDir()
	run, err = f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(run.RisingAtAnswer()) != 0 || len(run.Warnings) != 0 {
		t.Errorf("settled memory: rising %v, warnings %q", run.RisingAtAnswer(), run.Warnings)
	}
}

// TestMemoryAfterTheLargestBatches: a trial that ran only the loader's
// largest batches cannot say memory stopped rising; one step after them
// (and after the optimizer's first) can, and a soak that survived does.
func TestMemoryAfterTheLargestBatches(t *testing.T) {
	want := "memory after the largest batches was not seen at the answer"
	for _, tc := range []struct {
		name       string
		worstSteps int
		soak       time.Duration
		warned     bool
	}{
		{"only the largest batches ran", 3, 0, true},
		{"steps ran after them", 1, 0, false},
		{"a soak survived past them", 3, 10 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := plain
			tr.worstSteps = tc.worstSteps
			f := newFixture(tr)
			f.cfg.LogBase = t.TempDir()
			f.cfg.Soak = tc.soak
			run, err := f.run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			warned := slices.ContainsFunc(run.Warnings, func(w string) bool { return strings.Contains(w, want) })
			if warned != tc.warned {
				t.Fatalf("warned %v, want %v: %q", warned, tc.warned, run.Warnings)
			}
			if warned && !slices.ContainsFunc(run.Warnings, func(w string) bool {
				return strings.Contains(w, "ran only its 3 largest batches") && strings.Contains(w, "--steps 4")
			}) {
				t.Errorf("warnings %q do not say which trial, nor how many steps", run.Warnings)
			}
			if run.InputShapes == nil || !run.InputShapes.WorstFirst {
				t.Errorf("input shapes %+v, want worst first", run.InputShapes)
			}
			if tc.soak > 0 && (len(run.Soaks) != 1 || !run.Soaks[0].WorstFirst) {
				t.Errorf("soaks %+v, want one of the largest batches first", run.Soaks)
			}
		})
	}
}

func TestSoakThatSurvivesKeepsTheAnswer(t *testing.T) {
	tr := plain
	tr.rising = true // the short trials rose; the soak settles it
	f := newFixture(tr)
	f.cfg.LogBase = t.TempDir()
	f.cfg.Soak = 10 * time.Minute
	run, err := f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := plain.truth(4096)
	if run.Answer != want || len(run.Soaks) != 1 {
		t.Fatalf("answer %d, soaks %+v; want %d soaked once", run.Answer, run.Soaks, want)
	}
	s := run.Soaks[0]
	if s.Size != want || s.Outcome != classify.OK || s.Steps != 400 || len(s.StepPeaks) != 400 || s.Limit != 600 || run.Settings.SoakSecs != 600 {
		t.Errorf("soak %+v (settings %+v)", s, run.Settings)
	}
	last := run.Trials[len(run.Trials)-1]
	if last.Phase != record.PhaseSoak || last.Outcome != classify.OK || !strings.Contains(last.Reason, "soaked") || last.N != s.Trial {
		t.Errorf("soak trial %+v", last)
	}
	if v, _ := adapter.Lookup(f.exec.envs[len(f.exec.envs)-1], "BATCHFIT_STEPS"); v != strconv.Itoa(probe.SoakSteps) {
		t.Errorf("soak ran with BATCHFIT_STEPS=%q, want %d: endless, but a count a program can use", v, probe.SoakSteps)
	}
	// The soak's memory settled: no warning, though the short trials rose.
	if len(run.Warnings) != 0 {
		t.Errorf("warnings %q", run.Warnings)
	}
	if got := s.SoakText(); got != "soaked 10m at "+strconv.Itoa(want)+": ran 10m (400 steps)" {
		t.Errorf("soak text %q", got)
	}
}

func TestSoakOutOfMemoryMovesTheAnswerDown(t *testing.T) {
	tr := plain
	truth := plain.truth(4096)
	tr.soakFits, tr.soakSteps = truth-2, 312
	f := newFixture(tr)
	f.cfg.LogBase = t.TempDir()
	f.cfg.Soak = 10 * time.Minute
	run, err := f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != record.Found || run.Answer != truth-2 || run.FirstFailure != truth-1 {
		t.Fatalf("status %s, answer %d (first failure %d), want %d", run.Status, run.Answer, run.FirstFailure, truth-2)
	}
	var sizes []int
	for _, s := range run.Soaks {
		sizes = append(sizes, s.Size)
	}
	if !slices.Equal(sizes, []int{truth, truth - 1, truth - 2}) || run.Soaks[2].Outcome != classify.OK {
		t.Fatalf("soaks %+v", run.Soaks)
	}
	first := run.Soaks[0]
	if first.Outcome != classify.OOM || first.Steps != 312 {
		t.Errorf("first soak %+v", first)
	}
	for i, want := range []string{
		"soaked 10m at " + strconv.Itoa(truth) + ": out of memory after 312 steps; the answer is now " + strconv.Itoa(truth-1),
		"soaked 10m at " + strconv.Itoa(truth-1) + ": out of memory after 312 steps; the answer is now " + strconv.Itoa(truth-2),
	} {
		if i >= len(run.Warnings) || run.Warnings[i] != want {
			t.Errorf("warnings %q, want %q", run.Warnings, want)
		}
	}
	if !slices.Contains(f.progress.warns, run.Warnings[0]) {
		t.Errorf("shown %q", f.progress.warns)
	}

	// A workload that fails every soak stops after maxSoaks with an
	// answer below them, said not to be soaked.
	tr.soakFits = truth - 10
	f = newFixture(tr)
	f.cfg.LogBase = t.TempDir()
	f.cfg.Soak = time.Minute
	run, err = f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Soaks) != maxSoaks || run.Answer != truth-maxSoaks {
		t.Fatalf("answer %d after %d soaks", run.Answer, len(run.Soaks))
	}
	if w := run.Warnings[len(run.Warnings)-1]; !strings.Contains(w, "not soaked") || !strings.Contains(w, "--steps") {
		t.Errorf("warnings %q", run.Warnings)
	}
}

func TestSoakOutOfMemoryAtTheSmallestSize(t *testing.T) {
	tr := plain
	tr.soakFits, tr.soakSteps = -1, 5 // every soak fails
	f := newFixture(tr)
	f.cfg.LogBase = t.TempDir()
	f.cfg.Search.Max = 1
	f.cfg.Soak = time.Minute
	run, err := f.run(context.Background())
	if err == nil || run.Status != record.NothingFits {
		t.Fatalf("err %v, status %s: want nothing fits", err, run.Status)
	}
}

// With --worker the search runs warm and search.Settle confirms its answer
// in fresh processes; the soak then runs the settled answer in a fresh
// process as without a worker. An out-of-memory soak moves it down: the
// search below runs warm again, settles, and soaks its new answer.
func TestSoakWithWorker(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("the fake worker needs %s: %v", py, err)
	}
	truth := plain.truth(4096)
	tr := plain
	tr.soakFits, tr.soakSteps = truth-1, 312
	f := newFixture(tr)
	f.cfg.LogBase = t.TempDir()
	f.cfg.Soak = 10 * time.Minute
	f.cfg.Worker = &WorkerOptions{}
	f.cfg.Command = []string{py, "testdata/fakeworker.py"}
	f.cfg.Env = append(f.cfg.Env, fmt.Sprint("FAKE_FIXED=", tr.fixed), fmt.Sprint("FAKE_PER_SAMPLE=", tr.perSample), fmt.Sprint("FAKE_FITS=", truth))
	run, err := f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if run.Answer != truth-1 || run.FirstFailure != truth || len(run.Soaks) != 2 {
		t.Fatalf("answer %d (first failure %d), soaks %+v; want %d after two soaks", run.Answer, run.FirstFailure, run.Soaks, truth-1)
	}
	for i, want := range []struct {
		size    int
		outcome classify.Outcome
	}{{truth, classify.OOM}, {truth - 1, classify.OK}} {
		s := run.Soaks[i]
		if s.Size != want.size || s.Outcome != want.outcome || s.Trial < 1 || s.Trial > len(run.Trials) {
			t.Fatalf("soak %d: %+v, want %d %s", i, s, want.size, want.outcome)
		}
		if tr := run.Trials[s.Trial-1]; tr.Phase != record.PhaseSoak || tr.Size != s.Size || tr.Outcome != s.Outcome {
			t.Errorf("soak %d is trial %d: %+v", i, s.Trial, tr)
		}
	}
	if want := fmt.Sprintf("the answer is now %d", truth-1); !slices.ContainsFunc(run.Warnings, func(w string) bool { return strings.Contains(w, want) }) {
		t.Errorf("warnings %q, want %q", run.Warnings, want)
	}
	// The fresh processes: settling (the answer and its first failure),
	// then a soak, twice over; none of the warm trials.
	var soaked, settled []int
	for i, env := range f.exec.envs {
		if v, _ := adapter.Lookup(env, adapter.SoakEnv); v == "1" {
			soaked = append(soaked, f.exec.sizes[i])
		} else {
			settled = append(settled, f.exec.sizes[i])
		}
	}
	if !slices.Equal(soaked, []int{truth, truth - 1}) || !slices.Contains(settled, truth) || !slices.Contains(settled, truth+1) || !slices.Contains(settled, truth-1) {
		t.Errorf("fresh trials: soaked %v, settled %v", soaked, settled)
	}
}
