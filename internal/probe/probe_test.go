package probe

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/sim"
)

func TestMain(m *testing.M) {
	// Simulated trials re-execute this test binary in the child mode.
	if len(os.Args) > 1 && os.Args[1] == sim.ChildCommand {
		os.Exit(sim.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// simSearch runs a whole search through real simulated trial processes. The
// card holds each trial's peak until the sampler has listed it, so what the
// search learns from NVML's figures, and so the trials it runs, do not
// depend on how the scheduler interleaves trials and sampler.
func simSearch(t *testing.T, w sim.Workload, card sim.Card, cfg search.Config, fraction float64) (search.Result, *Prober, error) {
	t.Helper()
	return simSearchScope(t, w, card, cfg, fraction, false)
}

// simConfig is a Prober's configuration for trials of w on the simulated
// card (whose Dir the caller sets), each of steps steps, sampled through
// the card's backend, which it returns.
func simConfig(t *testing.T, card sim.Card, w sim.Workload, steps int) (Config, *sim.Backend) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	backend := sim.NewBackend(card)
	return Config{
		Command: sim.Command(exe, card, w),
		Env:     os.Environ(),
		Steps:   steps,
		Timeout: time.Minute,
		Grace:   time.Second,
		LogDir:  t.TempDir(),
		// Held peaks make any interval exact; a short one keeps the wait short.
		Sampler: gpu.NewSampler(backend, 5*time.Millisecond),
	}, backend
}

// simSearchScope is simSearch with the limit held for the whole process
// (Config.WholeProcess) when whole is set.
func simSearchScope(t *testing.T, w sim.Workload, card sim.Card, cfg search.Config, fraction float64, whole bool) (search.Result, *Prober, error) {
	t.Helper()
	card.Dir = t.TempDir()
	card.HoldPeak = true
	pc, backend := simConfig(t, card, w, 2)
	devices, _ := backend.Devices()
	cfg.Capacity = devices[0].Total
	if fraction > 0 {
		pc.Framework, pc.DeviceTotal = sim.Framework{}, devices[0].Total
		pc.MemoryLimit = uint64(fraction * float64(devices[0].Total))
		pc.WholeProcess = whole
		cfg.Capacity = pc.MemoryLimit
		cfg.AllocatorCap = true // as the CLI sets it for --memory-limit
	}
	p := New(pc)
	res, err := search.Run(context.Background(), cfg, p)
	return res, p, err
}

// The acceptance test: the search through real processes finds the
// simulator's ground truth for many random workload shapes, on odd bounds and
// grids, with both strategies.
func TestSearchFindsSimulatorTruth(t *testing.T) {
	rng := rand.New(rand.NewSource(20261129))
	card := sim.H100()
	shapes := 50
	if testing.Short() {
		shapes = 10
	}
	for i := 0; i < shapes; i++ {
		w := sim.RandomWorkload(rng)
		w.StepSleep = 0
		min := 1 + rng.Intn(5)
		max := 100 + rng.Intn(5000)
		multiple := []int{1, 1, 8, 3}[i%4]
		strategy := []search.Strategy{search.Model, search.Bisect}[i%2]
		want := w.TrueMax(card, 1, min, max, multiple)
		cfg := search.Config{Min: min, Max: max, MultipleOf: multiple, Strategy: strategy}
		res, p, err := simSearch(t, w, card, cfg, 0)
		if want == 0 {
			if !errors.Is(err, search.ErrNothingFits) {
				t.Errorf("shape %d (%s): nothing fits, got %d, %v", i, w.Name, res.Max, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("shape %d (%s, min %d max %d multiple %d, %s): %v", i, w.Name, min, max, multiple, strategy, err)
		}
		if res.Max != want {
			t.Errorf("shape %d (%s, min %d max %d multiple %d, %s): answer %d, simulator's truth %d", i, w.Name, min, max, multiple, strategy, res.Max, want)
		}
		for _, tr := range p.Trials() {
			if tr.Size%multiple != 0 || tr.Size < min || tr.Size > max {
				t.Errorf("shape %d: trial at %d is off the grid [%d, %d] step %d", i, tr.Size, min, max, multiple)
			}
		}
		t.Logf("shape %3d %-16s %-6s truth %5d trials %2d", i, w.Name, strategy, want, len(res.Trials))
	}
}

// --memory-limit reaches the simulated torch as an allocator fraction. The
// trials do not sleep, yet the sampler sees each one's peak: the card holds
// it until listed, so the NVML figures, and with them the trials the model
// chooses, are the same on every run.
func TestMemoryLimitReachesTrial(t *testing.T) {
	w := sim.ResNet50()
	w.StepSleep = 0
	card := sim.H100()
	fraction := float64(24<<30) / float64(card.Total)
	want := w.TrueMax(card, fraction, 1, 65536, 1)
	res, p, err := simSearch(t, w, card, search.Config{Min: 1, Max: 65536, MultipleOf: 1}, fraction)
	if err != nil {
		t.Fatal(err)
	}
	if res.Max != want || want != 282 {
		t.Errorf("answer %d, truth %d (the SimCLR workload at 24 GiB is 282)", res.Max, want)
	}
	// 6 to find the answer, 2 to re-check its proof pair in fresh trials.
	if len(res.Trials) > 8 {
		t.Errorf("model strategy took %d trials", len(res.Trials))
	}
	for _, tr := range p.Trials() {
		if _, _, device := w.Peak(tr.Size); tr.Outcome.Fits() && tr.Device != device {
			t.Errorf("trial %d at %d: NVML peak %d, the simulator's %d", tr.N, tr.Size, tr.Device, device)
		}
	}
}

func TestSubstitute(t *testing.T) {
	got := Substitute([]string{"python", "train.py", "--batch-size", "{}", "--bs={}", "x{}y{}"}, 64)
	want := []string{"python", "train.py", "--batch-size", "64", "--bs=64", "x64y64"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("arg %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestEnvOverridesAndPythonPath(t *testing.T) {
	p := New(Config{
		Env:         []string{"PATH=/bin", "BATCHFIT_BATCH_SIZE=999", "PYTHONPATH=/user/lib", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"},
		Steps:       4,
		PythonPath:  "/hook",
		Framework:   adapter.Torch{},
		MemoryLimit: 1 << 30,
		DeviceTotal: 4 << 30,
	})
	env := p.env(7, 128, 4, false, []int{2, 3}, 1<<30, filepath.Join("/logs", "r.jsonl"))
	want := map[string]string{
		"PATH":                    "/bin",
		"BATCHFIT_BATCH_SIZE":     "128",
		"BATCHFIT_STEPS":          "4",
		"BATCHFIT_TRIAL":          "7",
		"BATCHFIT_REPORT":         "/logs/r.jsonl",
		"CUDA_VISIBLE_DEVICES":    "2,3",
		"PYTHONPATH":              "/hook:/user/lib",
		"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,per_process_memory_fraction:0.25",
	}
	seen := map[string]int{}
	for _, kv := range env {
		k, v, _ := cut(kv)
		seen[k]++
		if w, ok := want[k]; ok && v != w {
			t.Errorf("%s = %q, want %q", k, v, w)
		}
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("%s appears %d times", k, seen[k])
		}
	}
}

func cut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// Trials that run at the same time share the CPUs: each is told its share
// (adapter.CPUThreadsEnv), and a trial that runs alone is not.
func TestConcurrentTrialsShareCPUs(t *testing.T) {
	dir := t.TempDir()
	p := New(Config{
		Command: []string{"sh", "-c", `echo "${` + adapter.CPUThreadsEnv + `:-none}" >` + dir + `/threads-{}`},
		Env:     os.Environ(),
		Timeout: time.Minute,
		Grace:   time.Second,
		LogDir:  t.TempDir(),
		Slots:   [][]int{nil, nil},
	})
	if _, err := p.Probe(context.Background(), search.Request{Sizes: []int{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Probe(context.Background(), search.Request{Sizes: []int{3}}); err != nil {
		t.Fatal(err)
	}
	want := map[int]string{1: strconv.Itoa(max(1, runtime.NumCPU()/2)), 2: strconv.Itoa(max(1, runtime.NumCPU()/2)), 3: "none"}
	for size, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, "threads-"+strconv.Itoa(size)))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != w {
			t.Errorf("trial at %d: %s=%s, want %s", size, adapter.CPUThreadsEnv, got, w)
		}
	}
}

// TestPinnedEnv: only the pinned GPUs are visible, numbered as NVML numbers
// them, whatever the user's environment said; a warm worker is pinned by it too.
func TestPinnedEnv(t *testing.T) {
	env := []string{"HOME=/h", "CUDA_VISIBLE_DEVICES=3"}
	if got := PinEnv(env, nil); !reflect.DeepEqual(got, env) {
		t.Errorf("not pinned: %v", got)
	}
	want := []string{"HOME=/h", "CUDA_VISIBLE_DEVICES=1", "CUDA_DEVICE_ORDER=PCI_BUS_ID"}
	if got := PinEnv(env, []int{1}); !reflect.DeepEqual(got, want) {
		t.Errorf("pinned to 1: %v, want %v", got, want)
	}
	if env[1] != "CUDA_VISIBLE_DEVICES=3" {
		t.Errorf("the caller's env changed: %v", env)
	}
}
