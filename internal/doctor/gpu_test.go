package doctor

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/worker"
)

// doctor on examples/worker/leaky_trial.py on a real GPU, torch's allocator
// capped at 24 GiB so that the doubling reaches an OOM soon: the memory it
// reports retained after the OOM must be within 10 % of the failed batch
// the Trial says it keeps (its tensors' sizes), and the growth per trial
// that of its list of losses (one 512-byte allocator block per step).
//
//	BATCHFIT_GPU_TESTS=1 go test -run TestLeakyTrialOnGPU -v ./internal/doctor
func TestLeakyTrialOnGPU(t *testing.T) {
	if os.Getenv("BATCHFIT_GPU_TESTS") != "1" {
		t.Skip("a GPU test: set BATCHFIT_GPU_TESTS=1 on a machine with a CUDA GPU to run it")
	}
	py := torchPython(t)
	out, err := exec.Command(py, "-c", "import torch; assert torch.cuda.is_available(); print(torch.cuda.get_device_properties(0).total_memory)").Output()
	if err != nil {
		t.Skipf("%s sees no CUDA GPU: %v", py, err)
	}
	total, _ := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)

	dir := t.TempDir()
	pp, err := adapter.Install(filepath.Join(dir, "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHONPATH=") && !strings.HasPrefix(kv, "BATCHFIT_") && !strings.HasPrefix(kv, "LEAKY_") {
			base = append(base, kv)
		}
	}
	leaky, _ := filepath.Abs("../../examples/worker/leaky_trial.py")
	argv := []string{py, "-m", "batchfit.worker", leaky + ":Trial"}
	stderr := filepath.Join(dir, "worker.err")
	w, err := worker.Start(context.Background(), argv, worker.Environ(base, pp, adapter.Torch{}, 24<<30, total), worker.Options{
		StdoutPath: filepath.Join(dir, "worker.out"), StderrPath: stderr})
	if err != nil {
		t.Fatal(err)
	}
	fresh := probe.New(probe.Config{Command: argv, Env: base, PythonPath: pp, Steps: 3, Timeout: 10 * time.Minute,
		LogDir: dir, MemoryLimit: 24 << 30, DeviceTotal: total, Framework: adapter.Torch{}})
	start := time.Now()
	r, err := Run(context.Background(), Config{Size: 16, Steps: 3, Timeout: 10 * time.Minute,
		Fresh: func(ctx context.Context, size int) (search.Observation, error) {
			obs, err := fresh.Probe(ctx, search.Request{Sizes: []int{size}})
			if err != nil {
				return search.Observation{}, err
			}
			return obs[0], nil
		}}, w)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	WriteText(&text, r)
	t.Logf("doctor took %s\n%s", time.Since(start).Round(time.Second), text.String())
	if r.OOMSize == 0 {
		t.Fatalf("no OOM: %s", r.Stopped)
	}

	log, _ := os.ReadFile(stderr)
	m := regexp.MustCompile(fmt.Sprintf(`keeping the failed batch of %d: (\d+) bytes`, r.OOMSize)).FindSubmatch(log)
	if m == nil {
		t.Fatalf("the Trial did not say what it keeps:\n%s", log)
	}
	kept, _ := strconv.ParseFloat(string(m[1]), 64)
	o := find(r.Findings, KindRetainedAfterOOM)
	if o == nil {
		t.Fatalf("no retained_after_oom finding: %v", kinds(r.Findings))
	}
	if math.Abs(float64(o.Bytes)-kept) > 0.1*kept {
		t.Errorf("doctor reports %d bytes retained after the OOM; the Trial keeps %.0f", o.Bytes, kept)
	}
	t.Logf("retained after the OOM: doctor %d bytes, the Trial's tensors %.0f bytes (%.3f %%)", o.Bytes, kept, 100*(float64(o.Bytes)-kept)/kept)
	if g := find(r.Findings, KindGrowing); g == nil || g.Bytes != 3*512 {
		t.Errorf("growing finding = %+v, want 3 steps x 512 bytes per trial", g)
	}
}
