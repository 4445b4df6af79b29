package worker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/procgroup"
	"github.com/batchfit/batchfit/internal/testutil"
)

// findPython returns an interpreter (with torch when asked), or skips.
// BATCHFIT_TEST_PYTHON names one explicitly; /usr/bin/python3 comes next
// because a pyenv python3 earlier on PATH usually lacks torch.
func findPython(t *testing.T, torch bool) string {
	t.Helper()
	testutil.NeedsFull(t, "a Python worker")
	candidates := []string{os.Getenv("BATCHFIT_TEST_PYTHON"), "/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	check := "import sys"
	if torch {
		check = "import torch"
	}
	var tried []string
	for _, c := range candidates {
		if c == "" {
			continue
		}
		tried = append(tried, c)
		if exec.Command(c, "-c", check).Run() == nil {
			return c
		}
	}
	if torch {
		t.Skipf("no python with torch found (tried %s): install python3-torch or set BATCHFIT_TEST_PYTHON", strings.Join(tried, ", "))
	}
	t.Skipf("no python found (tried %s)", strings.Join(tried, ", "))
	return ""
}

var (
	installOnce sync.Once
	installDir  string
	installErr  error
)

// pythonPath installs the embedded batchfit package once per test binary
// and returns the PYTHONPATH a worker needs: the package, then testdata.
func pythonPath(t *testing.T) string {
	t.Helper()
	installOnce.Do(func() {
		installDir, installErr = os.MkdirTemp("", "batchfit-worker-test-")
		if installErr == nil {
			_, installErr = adapter.Install(installDir)
		}
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
	td, _ := filepath.Abs("testdata")
	return installDir + string(os.PathListSeparator) + td
}

// installDirOf is where pythonPath installed the package.
func installDirOf(t *testing.T) string {
	pythonPath(t)
	return installDir
}

// testEnv is the environment of a test worker: ours, the package on
// PYTHONPATH, no bytecode litter, plus extra.
func testEnv(t *testing.T, extra ...string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHONPATH=") && !strings.HasPrefix(kv, "BATCHFIT_") {
			env = append(env, kv)
		}
	}
	env = append(env, "PYTHONPATH="+pythonPath(t), "PYTHONDONTWRITEBYTECODE=1")
	return append(env, extra...)
}

// startTorch starts the real worker on a trial of testdata/trials.py.
func startTorch(t *testing.T, target string, extra ...string) *Worker {
	t.Helper()
	py := findPython(t, true)
	w, err := Start(context.Background(), []string{py, "-m", "batchfit.worker", target}, testEnv(t, extra...), logOpts(t))
	if err != nil {
		if se, ok := err.(*StartError); ok {
			t.Fatalf("%v\n%s\n%s", err, se.Traceback, se.Tail)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// startFake starts testdata/fakeworker.py in mode.
func startFake(t *testing.T, mode string, extra ...string) (*Worker, error) {
	t.Helper()
	py := findPython(t, false)
	opts := logOpts(t)
	opts.StartTimeout = 20 * time.Second
	w, err := Start(context.Background(), []string{py, "testdata/fakeworker.py"}, testEnv(t, append(extra, "FAKE_MODE="+mode)...), opts)
	if err == nil {
		t.Cleanup(func() { w.Close() })
	}
	return w, err
}

func logOpts(t *testing.T) Options {
	dir := t.TempDir()
	return Options{
		StdoutPath: filepath.Join(dir, "worker.out"),
		StderrPath: filepath.Join(dir, "worker.err"),
		Grace:      2 * time.Second,
	}
}

// runTrial runs one trial with a generous timeout and fails on an error.
func runTrial(t *testing.T, w *Worker, size, steps int) Result {
	t.Helper()
	res, err := w.Trial(context.Background(), size, steps, time.Minute)
	if err != nil {
		t.Fatalf("trial at %d: %v", size, err)
	}
	return res
}

// alive reports whether a process exists (a zombie counts as gone).
func alive(pid int) bool {
	return !procgroup.Exited(pid)
}

func hasModule(python, module string) bool {
	return exec.Command(python, "-c", "import "+module).Run() == nil
}
