package worker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// gpuPython returns a python with torch (and modules) that sees a CUDA GPU,
// or skips: these tests need a GPU and take minutes, so they also need
// BATCHFIT_GPU_TESTS=1.
func gpuPython(t *testing.T, modules ...string) (python string, total uint64) {
	t.Helper()
	if os.Getenv("BATCHFIT_GPU_TESTS") != "1" {
		t.Skip("a GPU test: set BATCHFIT_GPU_TESTS=1 on a machine with a CUDA GPU to run it")
	}
	py := findPython(t, true)
	check := "import torch, sys\n" + "import " + strings.Join(append([]string{"os"}, modules...), ", ") +
		"\nassert torch.cuda.is_available()\nprint(torch.cuda.get_device_properties(0).total_memory)"
	out, err := exec.Command(py, "-c", check).Output()
	if err != nil {
		t.Skipf("%s has no CUDA GPU or lacks %v: %v", py, modules, err)
	}
	total, err = strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return py, total
}

// The SimCLR ResNet-50 with torch's allocator capped at 24 GiB has an exact
// answer of 282 (a bisection in fresh processes on an H200:
// bench/results/simclr-24gib-h200.txt). The warm search, settled in fresh
// processes, must answer 282 with 283 failing; the log says whether the
// warm answer needed moving. Logs the time and how the
// workers were used, once with the default recycling after every OOM and
// once keeping verified workers after an OOM.
//
//	BATCHFIT_GPU_TESTS=1 go test -run TestSimCLRSearchOnGPU -v -timeout 30m ./internal/worker
func TestSimCLRSearchOnGPU(t *testing.T) {
	py, total := gpuPython(t, "torchvision")
	const limit = 24 << 30
	target, _ := filepath.Abs("../../examples/worker/simclr_trial.py")
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep_after_oom=%v", keep), func(t *testing.T) {
			dir := t.TempDir()
			if d := os.Getenv("BATCHFIT_GPU_TEST_LOGS"); d != "" {
				dir = filepath.Join(d, t.Name())
				os.MkdirAll(dir, 0o755)
			}
			pp, err := adapter.Install(filepath.Join(dir, "adapter"))
			if err != nil {
				t.Fatal(err)
			}
			var base []string
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "PYTHONPATH=") && !strings.HasPrefix(kv, "BATCHFIT_") {
					base = append(base, kv)
				}
			}
			argv := []string{py, "-m", "batchfit.worker", target + ":Trial"}
			start := time.Now()
			since := func() string { return time.Since(start).Round(100 * time.Millisecond).String() }
			fresh := probe.New(probe.Config{Command: argv, Env: base, PythonPath: pp, Steps: 3, Timeout: 10 * time.Minute,
				LogDir: dir, MemoryLimit: limit, DeviceTotal: total, Framework: adapter.Torch{}})
			p := NewProber(ProberConfig{
				Command: argv, Env: Environ(base, pp, adapter.Torch{}, limit, total), Steps: 3, Timeout: 10 * time.Minute,
				LogDir: dir, KeepAfterOOM: keep, Fallback: fresh,
				OnReady: func(n int, h Hello) {
					t.Logf("%s worker %d ready: pid %d, %s, setup %.1fs, baseline %d bytes, %d warm-up steps",
						since(), n, h.PID, h.Device, h.SetupSeconds, h.BaselineAllocated, h.WarmupSteps)
				},
				OnDone: func(tr record.Trial) {
					t.Logf("%s trial %d batch %d: %s (%.1fs, peak %d)", since(), tr.N, tr.Size, tr.Outcome, tr.Seconds, tr.Allocated)
				},
				Warn: func(msg string) { t.Logf("%s warning: %s", since(), msg) },
			})
			defer p.Close()
			cfg := phased(search.Config{Min: 1, Max: 4096, Strategy: search.Model, Capacity: limit}, p)
			ctx := context.Background()
			res, err := search.Run(ctx, cfg, p)
			if err != nil {
				t.Fatalf("search: %v", err)
			}
			searched := time.Since(start)
			st, err := search.Settle(ctx, cfg, p, res.Max, res.FirstFailure)
			if err != nil {
				t.Fatalf("settle: %v", err)
			}
			recs := p.Records()
			warm, freshN, recycled := 0, 0, 0
			for _, r := range recs {
				switch {
				case r.Fresh:
					freshN++
				default:
					warm++
				}
				if r.Recycled {
					recycled++
				}
			}
			t.Logf("warm answer %d (first failure %d); fresh answer %d (first failure %d, agreed %v); search %s, settled %s; %d warm trials on %d workers (%d recycled), %d fresh trials",
				res.Max, res.FirstFailure, st.Max, st.FirstFailure, st.Agreed, searched.Round(time.Second), time.Since(start).Round(time.Second),
				warm, len(p.Workers()), recycled, freshN)
			for _, w := range p.Workers() {
				t.Logf("worker %d pid %d: %d trials, retired: %s", w.N, w.PID, w.Trials, w.Retired)
			}
			if st.Max != 282 || st.FirstFailure != 283 {
				t.Errorf("fresh answer %d (first failure %d), want 282 (283); warm answer %d", st.Max, st.FirstFailure, res.Max)
			}
			if res.Max != 282 {
				t.Logf("the warm search's own answer was %d: the fresh settling moved it", res.Max)
			}
		})
	}
}
