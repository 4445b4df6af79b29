package doctor

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/testutil"
	"github.com/batchfit/batchfit/internal/worker"
)

// torchPython returns an interpreter with torch, or skips.
func torchPython(t *testing.T) string {
	t.Helper()
	testutil.NeedsFull(t, "torch")
	var tried []string
	for _, c := range []string{os.Getenv("BATCHFIT_TEST_PYTHON"), "/usr/bin/python3", "python3"} {
		if c == "" {
			continue
		}
		tried = append(tried, c)
		if exec.Command(c, "-c", "import torch").Run() == nil {
			return c
		}
	}
	t.Skipf("no python with torch found (tried %s): install python3-torch or set BATCHFIT_TEST_PYTHON", strings.Join(tried, ", "))
	return ""
}

// doctor on examples/worker/leaky_trial.py, for real, on CPU torch: the
// worker's census finds both of its mistakes, and the bytes it reports are
// the bytes the Trial says it keeps. The fresh comparison runs through the
// fresh-process prober, as the CLI does.
func TestLeakyTrialOnCPU(t *testing.T) {
	py := torchPython(t)
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
	base = append(base, "PYTHONDONTWRITEBYTECODE=1", "CUDA_VISIBLE_DEVICES=")
	leaky, _ := filepath.Abs("../../examples/worker/leaky_trial.py")
	argv := []string{py, "-m", "batchfit.worker", leaky + ":Trial"}
	stderr := filepath.Join(dir, "worker.err")
	w, err := worker.Start(context.Background(), argv, adapter.Env(base, pp, ""), worker.Options{
		StdoutPath: filepath.Join(dir, "worker.out"), StderrPath: stderr})
	if err != nil {
		t.Fatal(err)
	}
	fresh := probe.New(probe.Config{Command: argv, Env: base, PythonPath: pp, Steps: 2, Timeout: time.Minute, LogDir: dir, Framework: adapter.Torch{}})
	cfg := Config{Size: 8, Steps: 2, MaxSize: 1024, Timeout: time.Minute,
		Fresh: func(ctx context.Context, size int) (search.Observation, error) {
			obs, err := fresh.Probe(ctx, search.Request{Sizes: []int{size}})
			if err != nil {
				return search.Observation{}, err
			}
			return obs[0], nil
		}}
	r, err := Run(context.Background(), cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("DOCTOR_SHOW") != "" {
		WriteText(os.Stderr, r)
	}
	if r.OOMSize != 128 || r.Stopped != "" {
		t.Fatalf("report = %+v", r)
	}

	// What the Trial says it keeps, from its stderr.
	log, _ := os.ReadFile(stderr)
	failed := lastInt(t, log, `keeping the failed batch of 128: (\d+) bytes`)
	losses := lastInt(t, log, `keeping 6 loss tensors: (\d+) bytes`) // after the three repeats of two steps

	g := find(r.Findings, KindGrowing)
	if g == nil || g.Bytes != losses/3 {
		t.Errorf("growing finding = %+v, want %d bytes per trial", g, losses/3)
	}
	o := find(r.Findings, KindRetainedAfterOOM)
	if o == nil || o.Bytes != failed {
		t.Errorf("after-OOM finding = %+v, want the failed batch's %d bytes", o, failed)
	}
	if len(o.Tensors) == 0 || o.Tensors[0].Shape[0] != 128 {
		t.Errorf("the largest tensor left must be the failed batch: %+v", o.Tensors)
	}
	if r.Fresh == nil || r.Fresh.Outcome != classify.OK || find(r.Findings, KindNoComparison) == nil {
		t.Errorf("fresh = %+v, findings %v", r.Fresh, kinds(r.Findings))
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	checkSnakeCase(t, js)
}

func lastInt(t *testing.T, log []byte, pattern string) int64 {
	t.Helper()
	m := regexp.MustCompile(pattern).FindAllSubmatch(log, -1)
	if len(m) == 0 {
		t.Fatalf("no %q in the Trial's stderr:\n%s", pattern, log)
	}
	n, _ := strconv.ParseInt(string(m[len(m)-1][1]), 10, 64)
	return n
}
