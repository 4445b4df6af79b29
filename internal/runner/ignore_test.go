package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/caveat"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// ignoring needs 3 GiB at every size: it never reads its batch size.
var ignoring = fakeTrainer{fixed: 3 * gib, limit: 80 * gib}

// noBraces is the display's warning, after the first trials, for a command
// without {} whose program did not take its size from batchfit.batch_size().
const noBraces = "the command has no {}; only BATCHFIT_BATCH_SIZE carries the batch size"

func TestRunStopsACommandThatIgnoresTheSize(t *testing.T) {
	for _, tc := range []struct {
		name     string
		command  []string
		strategy search.Strategy
		sizeRead bool
		hint     string
	}{
		{"no {}, env not read", []string{"train"}, search.Model, false, "pass the size with {} in the command (--batch-size {}), or read BATCHFIT_BATCH_SIZE"},
		{"{} given but not used", []string{"train", "{}"}, search.Model, false, "check that the option {} fills sets the batch size"},
		// The program takes the size from batchfit.batch_size() and then
		// trains at a size of its own: flat trials still stop it.
		{"batchfit.batch_size() read but not used", []string{"train"}, search.Model, true, "check that the size batchfit.batch_size() returns sets the batch size"},
		// Doubling from 1, the sizes are first far enough apart at 8192.
		{"bisection", []string{"train"}, search.Bisect, false, "pass the size with {}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trainer := ignoring
			trainer.sizeRead = tc.sizeRead
			f := newFixture(trainer)
			f.cfg.LogBase = t.TempDir()
			f.cfg.Command = tc.command
			f.cfg.Search.Max = 65536
			f.cfg.Search.Strategy = tc.strategy
			run, err := f.run(context.Background())
			var ign *caveat.IgnoresBatchSizeError
			if !errors.As(err, &ign) || errors.Is(err, search.ErrNothingFits) {
				t.Fatalf("err = %v (answer %d), want IgnoresBatchSizeError", err, run.Answer)
			}
			if !strings.HasPrefix(err.Error(), "the command does not seem to use the batch size: peak memory (allocated) 3.00 GiB at batch size ") ||
				!strings.HasSuffix(err.Error(), ", median step 0.1s and 0.1s") || !strings.Contains(ign.Hint(), tc.hint) {
				t.Errorf("message %q, hint %q", err, ign.Hint())
			}
			// It stops on the first trial that makes the evidence, before --max.
			tried := f.exec.tried()
			if largest := slices.Max(tried); largest >= 65536 || ign.Large != largest || ign.Small != slices.Min(tried) || ign.Large-ign.Small < 4096 || tried[len(tried)-1] != largest {
				t.Errorf("tried %v, evidence %d..%d", tried, ign.Small, ign.Large)
			}
			if tc.strategy == search.Bisect && slices.Max(tried) != 8192 {
				t.Errorf("bisection tried %v; want it to stop at 8192, the first size 4096 above 1", tried)
			}
			if run.Status != record.Failed || run.Error != err.Error() || run.Answer != 0 || len(run.Trials) != len(tried) {
				t.Errorf("recorded %s %q, answer %d, %d trials", run.Status, run.Error, run.Answer, len(run.Trials))
			}
			if warned := slices.Contains(f.progress.warns, noBraces); warned != (!hasPlaceholder(tc.command) && !tc.sizeRead) {
				t.Errorf("warnings %q: the no-{} warning is wanted exactly when there is no {} and the size was not read", f.progress.warns)
			}
		})
	}
}

func TestRunSearchesOnWhereTheSizeIsUsed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trainer fakeTrainer
	}{
		// Weights and optimizer state fill most of the card; each sample
		// adds a little, down to just above the least a sample can cost.
		{"weights-dominated, 64 KiB a sample", fakeTrainer{fixed: 79 * gib, perSample: 64 << 10, limit: 80 * gib}},
		{"weights-dominated, 300 B a sample", fakeTrainer{fixed: 70 * gib, perSample: 300, limit: 80 * gib}},
		{"tiny model, 300 B a sample", fakeTrainer{fixed: 20 << 20, perSample: 300, limit: 80 * gib}},
		// Gradient accumulation: the micro-batch, and so the peak, stays;
		// the optimizer step takes longer with every sample.
		{"flat memory, steps that grow", fakeTrainer{fixed: 3 * gib, limit: 80 * gib, stepPerSample: 1e-5}},
	} {
		for _, strategy := range []search.Strategy{search.Model, search.Bisect} {
			t.Run(tc.name+"/"+string(strategy), func(t *testing.T) {
				f := newFixture(tc.trainer)
				f.cfg.LogBase = t.TempDir()
				f.cfg.Command = []string{"train"}
				f.cfg.Search.Max = 65536
				f.cfg.Search.Strategy = strategy
				run, err := f.run(context.Background())
				if err != nil {
					t.Fatalf("err = %v after trials at %v", err, f.exec.tried())
				}
				if want := tc.trainer.truth(65536); run.Answer != want {
					t.Errorf("answer %d, want %d", run.Answer, want)
				}
				// The trials show that the size is used: no warning at the end.
				if len(run.Warnings) != 0 {
					t.Errorf("warnings %q", run.Warnings)
				}
			})
		}
	}
}

func TestRunWarnsWhenTheTrialsCannotTell(t *testing.T) {
	blind := fakeTrainer{fixed: 3 * gib, limit: 80 * gib, noFigures: true}
	const warning = "every size up to --max 4096 ran and the command has no {}: check that it uses BATCHFIT_BATCH_SIZE"
	for _, tc := range []struct {
		name      string
		trainer   fakeTrainer
		command   []string
		simulated bool
		max       int
		warnings  []string
	}{
		{"no figures, no {}", blind, []string{"train"}, false, 4096, []string{warning}},
		{"no figures, no {}, the size read through batchfit.batch_size()", reading(blind), []string{"train"}, false, 4096, nil},
		{"no figures, {} given", blind, []string{"train", "{}"}, false, 4096, nil},
		// PyTorch on a CPU: step times, no memory. Flat steps with {} warn;
		// steps that grow with the size do not.
		{"flat steps, no memory, {} given", fakeTrainer{fixed: 3 * gib, limit: 80 * gib, noMemory: true}, []string{"train", "{}"}, false, 4096,
			[]string{"every size up to --max 4096 ran in the same time a step (0.1s at batch size 1, 0.1s at 4096): check that {} sets the batch size each step runs"}},
		{"flat steps, no memory, the size read through batchfit.batch_size()", reading(fakeTrainer{fixed: 3 * gib, limit: 80 * gib, noMemory: true}), []string{"train"}, false, 4096,
			[]string{"every size up to --max 4096 ran in the same time a step (0.1s at batch size 1, 0.1s at 4096): check that the size batchfit.batch_size() returns sets the batch size each step runs"}},
		{"growing steps, no memory, {} given", fakeTrainer{fixed: 3 * gib, limit: 80 * gib, noMemory: true, stepPerSample: 1e-3}, []string{"train", "{}"}, false, 4096, nil},
		{"no figures, sizes less than 4x apart", blind, []string{"train"}, false, 3, nil},
		// Allocated peaks within the tolerance, but at sizes too close to
		// stop on (--max 4096): the end of the search says so.
		{"flat figures below the span to stop on", ignoring, []string{"train"}, false, 4096, []string{warning}},
		{"the simulator", blind, []string{"train"}, true, 4096, nil},
		{"a boundary below --max", fakeTrainer{fixed: 90 * gib, perSample: 1, limit: 80 * gib, noFigures: true}, []string{"train"}, false, 4096, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(tc.trainer)
			f.cfg.LogBase = t.TempDir()
			f.cfg.Command = tc.command
			f.cfg.Simulated = tc.simulated
			f.cfg.Search.Max = tc.max
			f.cfg.Search.Strategy = search.Bisect
			run, err := f.run(context.Background())
			if err != nil && !errors.Is(err, search.ErrNothingFits) {
				t.Fatal(err)
			}
			if !slices.Equal(run.Warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", run.Warnings, tc.warnings)
			}
			if warned := slices.Contains(f.progress.warns, noBraces); warned != (!tc.simulated && !hasPlaceholder(tc.command) && !tc.trainer.sizeRead) {
				t.Errorf("warnings of the display %q", f.progress.warns)
			}
		})
	}
}

// reading is t whose program takes its size from batchfit.batch_size().
func reading(t fakeTrainer) fakeTrainer {
	t.sizeRead = true
	return t
}

// A command without {} whose program takes its size from
// batchfit.batch_size() (the one-line use: the Python API searches the
// program itself) is searched as one with {}: the exact answer, no
// warning, and every trial says the size was read.
func TestRunTakesTheSizeReadThroughTheAPI(t *testing.T) {
	trainer := reading(fakeTrainer{fixed: 3 * gib, perSample: 64 << 20, limit: 80 * gib})
	f := newFixture(trainer)
	f.cfg.LogBase = t.TempDir()
	f.cfg.Command = []string{"python", "train.py"}
	run, err := f.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := trainer.truth(4096); run.Answer != want {
		t.Errorf("answer %d, want %d", run.Answer, want)
	}
	if len(run.Warnings) != 0 || len(f.progress.warns) != 0 || len(f.notices) != 0 {
		t.Errorf("warnings %q, display %q, notices %q", run.Warnings, f.progress.warns, f.notices)
	}
	for _, tr := range run.Trials {
		if !tr.SizeRead {
			t.Errorf("trial %d at %d: size_read false", tr.N, tr.Size)
		}
	}
}
