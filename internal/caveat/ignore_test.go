package caveat

import (
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

const gib = 1 << 30

func TestFlatness(t *testing.T) {
	const mib = 1 << 20
	ok := func(size int, allocated, device uint64, step float64) record.Trial {
		tr := record.Trial{Size: size, Outcome: classify.OK, Allocated: allocated, Device: device}
		if step > 0 {
			tr.StepTimes = []float64{step, step, step}
		}
		return tr
	}
	oom := record.Trial{Size: 1 << 20, Outcome: classify.OOM}
	for _, tc := range []struct {
		name    string
		trials  []record.Trial
		ignored bool
		grew    bool
	}{
		{"allocated flat to the byte, 8 to 65536", []record.Trial{ok(8, 3*gib, 0, 0), ok(65536, 3*gib, 0, 0)}, true, false},
		{"allocated within 512 KiB", []record.Trial{ok(8, 3*gib, 0, 0), ok(500, 3*gib+300<<10, 0, 0), ok(65536, 3*gib+512<<10, 0, 0)}, true, false},
		{"allocated 1 MiB apart", []record.Trial{ok(8, 3*gib, 0, 0), ok(65536, 3*gib+mib, 0, 0)}, false, true},
		{"a failure does not count", []record.Trial{ok(8, 3*gib, 0, 0), oom, ok(65536, 3*gib, 0, 0)}, true, false},
		{"sizes less than 4x apart", []record.Trial{ok(20000, 3*gib, 0, 0), ok(65536, 3*gib, 0, 0)}, false, false},
		{"sizes 4x but only 3000 apart", []record.Trial{ok(1000, 3*gib, 0, 0), ok(4000, 3*gib, 0, 0)}, false, false},
		{"one trial", []record.Trial{ok(8, 3*gib, 0, 0)}, false, false},
		{"steps flat within 25 %", []record.Trial{ok(8, 3*gib, 0, 0.1), ok(65536, 3*gib, 0, 0.12)}, true, false},
		{"steps 1.5x apart", []record.Trial{ok(8, 3*gib, 0, 0.1), ok(65536, 3*gib, 0, 0.15)}, false, true},
		{"step times of one trial only", []record.Trial{ok(8, 3*gib, 0, 0.1), ok(65536, 3*gib, 0, 0)}, true, false},
		// NVML only where some trial lacks the allocator's figure; flat
		// means within 16 MiB, over sizes 131072 apart.
		{"device flat, far apart", []record.Trial{ok(8, 3*gib, 4*gib, 0), ok(200000, 0, 4*gib+8*mib, 0)}, true, false},
		{"device flat, 65536 apart", []record.Trial{ok(8, 0, 4*gib, 0), ok(65536, 0, 4*gib, 0)}, false, false},
		{"device grows", []record.Trial{ok(8, 0, 4*gib, 0), ok(65536, 0, 4*gib+32*mib, 0)}, false, true},
		// A preallocated pool (JAX's 75 %) is flat whatever the batch.
		{"device flat at a preallocated pool", []record.Trial{ok(8, 0, 60*gib, 0), ok(200000, 0, 60*gib, 0)}, false, false},
		{"no figures", []record.Trial{ok(8, 0, 0, 0), ok(65536, 0, 0, 0)}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := measureFlatness(tc.trials, 80*gib)
			if f.ignored() != tc.ignored || f.grew() != tc.grew {
				t.Errorf("ignored %v, grew %v; want %v, %v (%+v)", f.ignored(), f.grew(), tc.ignored, tc.grew, f)
			}
		})
	}
	// Without the card's size NVML's figure cannot be told from a pool.
	if f := measureFlatness([]record.Trial{ok(8, 0, 4*gib, 0), ok(200000, 0, 4*gib, 0)}, 0); f.ignored() {
		t.Errorf("an NVML figure of unknown share counted: %+v", f)
	}
}

func TestIgnoresBatchSizeErrorWords(t *testing.T) {
	e := &IgnoresBatchSizeError{Small: 1, Large: 8192, Figure: search.FigureDevice, SmallPeak: 4 * gib, LargePeak: 4 * gib}
	if got, want := e.Error(), "the command does not seem to use the batch size: peak memory (device) 4.00 GiB at batch size 1 and 4.00 GiB at 8192"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	for _, tc := range []struct {
		placeholder, sizeRead, worker bool
		hint                          string
	}{
		{false, false, false, "pass the size with {} in the command (--batch-size {}), or read BATCHFIT_BATCH_SIZE"},
		{true, false, false, "check that the option {} fills sets the batch size each step runs"},
		{false, true, false, "check that the size batchfit.batch_size() returns sets the batch size each step runs"},
		{false, false, true, "the Trial's step(state, batch_size)"},
	} {
		e.Placeholder, e.SizeRead, e.Worker = tc.placeholder, tc.sizeRead, tc.worker
		if !strings.Contains(e.Hint(), tc.hint) {
			t.Errorf("{} %v, size read %v, worker %v: hint %q, want %q", tc.placeholder, tc.sizeRead, tc.worker, e.Hint(), tc.hint)
		}
	}
}
