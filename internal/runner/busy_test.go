package runner

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/claim"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/limit"
	"github.com/batchfit/batchfit/internal/probe"
)

const mib = 1 << 20

func TestTooBusy(t *testing.T) {
	tests := []struct {
		name               string
		total, held, limit uint64
		want               bool
	}{
		{"idle card", 80 * gib, 0, 0, false},
		{"a display server", 80 * gib, 200 * mib, 0, false},
		{"just past the threshold", 80 * gib, BusyThreshold + 1, 0, true},
		{"another job", 80 * gib, 10 * gib, 0, true},
		{"another job, room under the limit", 80 * gib, 10 * gib, 24 * gib, false},
		{"exactly the limit and a context left", 80 * gib, 55 * gib, 24 * gib, false},
		{"less than the limit and a context left", 80 * gib, 55*gib + 1, 24 * gib, true},
		{"more than the card (a driver oddity)", 80 * gib, 81 * gib, 24 * gib, true},
	}
	for _, tt := range tests {
		if got := tooBusy(tt.total, tt.held, tt.limit); got != tt.want {
			t.Errorf("%s: tooBusy(%d, %d, %d) = %v, want %v", tt.name, tt.total, tt.held, tt.limit, got, tt.want)
		}
	}
}

func TestForeignLimit(t *testing.T) {
	devs := []gpu.Device{{Index: 0, Total: 80 * gib}, {Index: 1, Total: 80 * gib}}
	if got := foreignLimit(devs, nil, 0, 1); got != BusyThreshold {
		t.Errorf("whole card: %d, want the threshold", got)
	}
	// The fuller GPU sets the room: 80 - 10 - 24 - 1 = 45 GiB.
	if got := foreignLimit(devs, map[int]uint64{1: 10 * gib}, 24*gib, 1); got != 45*gib {
		t.Errorf("under a limit: %d, want 45 GiB", got)
	}
	// Two capped trials side by side on each GPU: 80 - 10 - 2·25 = 20 GiB.
	if got := foreignLimit(devs, map[int]uint64{1: 10 * gib}, 24*gib, 2); got != 20*gib {
		t.Errorf("two side by side: %d, want 20 GiB", got)
	}
	if got := foreignLimit(devs, map[int]uint64{0: 79 * gib}, 24*gib, 1); got != BusyThreshold {
		t.Errorf("no room: %d, want the threshold", got)
	}
}

// localFixture runs real trial processes here, watched through the fake
// GPU, as a search without an executor does.
func localFixture(t *testing.T) (*fixture, Deps) {
	f := newFixture(plain)
	f.cfg.LogBase = t.TempDir()
	f.cfg.Command = []string{"sh", "-c", `[ "$0" -le 30 ] || { echo "torch.OutOfMemoryError: CUDA out of memory." >&2; exit 1; }`, probe.Placeholder}
	f.cfg.Framework = adapter.None{}
	f.cfg.Search.Max = 100
	deps := f.deps()
	deps.Executor = nil
	return f, deps
}

func TestRunRefusesBusyGPU(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(f *fixture)
		refused bool
		msg     string // in the error, or in a notice when not refused
		line    string // a notice that names the holder
	}{
		{"a stranger", func(f *fixture) { f.gpu.procs = map[int]uint64{4242: 2 * gib} },
			true, "gpu 0 (Fake GPU) is in use: other processes hold 2.00 GiB", "gpu 0 (Fake GPU): pid 4242 "},
		{"a display server", func(f *fixture) { f.gpu.procs = map[int]uint64{4242: 200 * mib} },
			false, "", "note: gpu 0 (Fake GPU): pid 4242 "},
		{"room left under --memory-limit", func(f *fixture) {
			f.gpu.procs = map[int]uint64{4242: 40 * gib}
			f.cfg.MemoryLimit = limit.Limit{Bytes: 24 * gib}
		}, false, "", "holds 40.00 GiB"},
		{"too little room under --memory-limit", func(f *fixture) {
			f.gpu.procs = map[int]uint64{4242: 60 * gib}
			f.cfg.MemoryLimit = limit.Limit{Bytes: 24 * gib}
		}, true, "which leaves less than --memory-limit 24.00 GiB", "pid 4242"},
		{"no per-process figures", func(f *fixture) { f.gpu.noProcs, f.gpu.used = true, gib },
			true, "other processes hold 1.00 GiB", "1.00 GiB in use (a device-wide figure"},
		{"another search", func(f *fixture) {
			f.claims = heldBy(t, f.cfg.Group.Devices, claim.Holder{PID: 777, Command: []string{"python", "train.py"}, Run: "abc123", Recorded: true})
		}, true, "another search is running on the same GPU: run abc123 by batchfit (pid 777): python train.py", ""},
		{"another search without a history", func(f *fixture) {
			f.claims = heldBy(t, f.cfg.Group.Devices, claim.Holder{PID: 777, Command: []string{"python", "train.py"}, Recorded: true})
		}, true, "another search is running on the same GPU: batchfit (pid 777): python train.py", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, deps := localFixture(t)
			tt.setup(f)
			deps.Claims = f.claims
			run, err := Run(context.Background(), f.cfg, deps)
			notices := strings.Join(f.notices, "\n")
			if tt.line != "" && !strings.Contains(notices, tt.line) {
				t.Errorf("notices %q; want one with %q", notices, tt.line)
			}
			if !tt.refused {
				if err != nil || run.Answer != 30 {
					t.Fatalf("run %v, %v; want answer 30", run, err)
				}
				return
			}
			var busy *BusyGPUError
			var ce *hint.ConfigError
			if !errors.As(err, &busy) || errors.As(err, &ce) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v; want a BusyGPUError with %q", err, tt.msg)
			}
			if h := hint.Of(err); !strings.Contains(h, "--allow-busy-gpu") {
				t.Errorf("hint %q does not name --allow-busy-gpu", h)
			}
			if run != nil || len(f.store.begun) != 0 || len(f.store.trials) != 0 {
				t.Errorf("refused, yet a run was recorded (%v, %d begun, %d trials)", run, len(f.store.begun), len(f.store.trials))
			}

			// --allow-busy-gpu: the search runs and the run says why it may be low.
			f, deps = localFixture(t)
			tt.setup(f)
			deps.Claims = f.claims
			f.cfg.AllowBusyGPU = true
			run, err = Run(context.Background(), f.cfg, deps)
			if err != nil || run.Answer != 30 {
				t.Fatalf("with --allow-busy-gpu: %v, %v", run, err)
			}
			if w := strings.Join(run.Warnings, "\n"); !strings.Contains(w, tt.msg) {
				t.Errorf("warnings %q; want %q", w, tt.msg)
			}
			// Each was shown as it was recorded, in the same words: the
			// display, which shows the warnings it has not shown, adds none.
			shown := map[string]bool{}
			for _, n := range f.notices {
				if w, ok := strings.CutPrefix(n, "warning: "); ok {
					shown[w] = true
				}
			}
			for _, w := range run.Warnings {
				if !shown[w] {
					t.Errorf("warning %q recorded, not shown as it was (shown: %q)", w, f.notices)
				}
			}
		})
	}
}

// heldBy returns GPU locks in which h holds devices until t ends.
func heldBy(t *testing.T, devices []gpu.Device, h claim.Holder) claim.Locks {
	t.Helper()
	locks := claim.Locks{Dir: t.TempDir()}
	c, err := locks.Take(devices, claim.Holder{PID: h.PID, Command: h.Command})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	if h.Recorded {
		if err := c.Recorded(h.Run); err != nil {
			t.Fatal(err)
		}
	}
	return locks
}

// startHook calls onStart as each trial starts.
type startHook struct {
	Progress
	onStart func()
}

func (p startHook) TrialStarted(n, size int, gpus []int) {
	p.onStart()
	p.Progress.TrialStarted(n, size, gpus)
}

// A search holds its GPUs from before it is recorded to its end, named by
// its run, and lets go of them when it ends.
func TestRunClaimsItsGPUs(t *testing.T) {
	f, deps := localFixture(t)
	locks := claim.Locks{Dir: t.TempDir()}
	deps.Claims = locks
	devices := f.cfg.Group.Devices
	var during []error
	progress := deps.Progress
	deps.Progress = func(info ProgressInfo) Progress {
		return startHook{Progress: progress(info), onStart: func() {
			c, err := locks.Take(devices, claim.Holder{PID: 1})
			if err == nil {
				c.Release()
			}
			during = append(during, err)
		}}
	}
	run, err := Run(context.Background(), f.cfg, deps)
	if err != nil || run.Answer != 30 {
		t.Fatalf("run %v, %v; want answer 30", run, err)
	}
	if len(during) == 0 {
		t.Fatal("no trial ran")
	}
	for _, err := range during {
		var held *claim.HeldError
		if !errors.As(err, &held) || held.Holder.PID != os.Getpid() || held.Holder.Run != "run-1" {
			t.Fatalf("a claim during a trial: %v (%+v); want it refused, held by run-1 of this process", err, held)
		}
	}
	c, err := locks.Take(devices, claim.Holder{PID: 1})
	if err != nil {
		t.Fatalf("a claim after the run: %v", err)
	}
	c.Release()
}
