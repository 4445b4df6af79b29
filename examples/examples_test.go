package examples

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
)

// python returns an interpreter that has the given modules, or skips the
// test. BATCHFIT_TEST_PYTHON names one explicitly; /usr/bin/python3 comes
// next because a pyenv python3 earlier on PATH usually lacks torch.
func python(t *testing.T, modules ...string) string {
	t.Helper()
	candidates := []string{os.Getenv("BATCHFIT_TEST_PYTHON"), "/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	var tried []string
	check := "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))"
	for _, c := range candidates {
		if c == "" {
			continue
		}
		tried = append(tried, c)
		if exec.Command(c, append([]string{"-c", check}, modules...)...).Run() == nil {
			return c
		}
	}
	t.Skipf("no python with %s found (tried %s; install python3-torch and python3-torchvision, or set BATCHFIT_TEST_PYTHON)",
		strings.Join(modules, " and "), strings.Join(tried, ", "))
	return ""
}

// runTrial runs an example as a batchfit trial runs it: adapter installed,
// BATCHFIT_BATCH_SIZE and BATCHFIT_STEPS set, a report file.
func runTrial(t *testing.T, py string, batch, steps string, args ...string) (string, adapter.Summary) {
	t.Helper()
	dir := t.TempDir()
	pythonPath, err := adapter.Install(filepath.Join(dir, "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.jsonl")
	base := append(os.Environ(), "BATCHFIT_BATCH_SIZE="+batch, "BATCHFIT_STEPS="+steps, "PYTHONDONTWRITEBYTECODE=1")
	cmd := exec.Command(py, args...)
	cmd.Env = adapter.Env(base, pythonPath, report)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", args[0], err, stdout.String(), stderr.String())
	}
	events, bad, err := adapter.Read(report)
	if err != nil || bad != 0 {
		t.Fatalf("report: %d bad lines, %v", bad, err)
	}
	return stdout.String(), adapter.Summarize(events)
}

// checkRun checks a trial of an example run for BATCHFIT_STEPS=steps. The
// examples run that many steps by themselves too, but the adapter stops them
// first, inside the last optimizer step: its line is never printed.
func checkRun(t *testing.T, stdout string, s adapter.Summary, batch string, steps int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != steps-1 {
		t.Errorf("printed %d lines, want one per step before the last (%d):\n%s", len(lines), steps-1, stdout)
	}
	for _, l := range lines {
		if !strings.Contains(l, " batch "+batch+" loss ") {
			t.Errorf("step line %q does not show batch %s and a loss", l, batch)
		}
	}
	if s.Events != 1 || s.Torch == "" || s.Exception != "" || s.OOM {
		t.Errorf("summary = %+v, want one clean exit event from torch", s)
	}
	if s.Steps != steps || len(s.StepTimes) != steps-1 || !s.Stopped {
		t.Errorf("hook saw %d steps (%d times), stopped %v; want %d, stopped", s.Steps, len(s.StepTimes), s.Stopped, steps)
	}
}

func TestSimCLRResNet50CPU(t *testing.T) {
	t.Parallel()
	py := python(t, "torch", "torchvision")
	// 64 px keeps a ResNet-50 step on the CPU to about a second; the network
	// pools adaptively, so every layer still runs.
	out, s := runTrial(t, py, "2", "2", filepath.Join("simclr_resnet50", "train.py"), "--device", "cpu", "--image-size", "64")
	checkRun(t, out, s, "2", 2)
}

func TestTransformerLMCPU(t *testing.T) {
	t.Parallel()
	py := python(t, "torch")
	out, s := runTrial(t, py, "3", "2", filepath.Join("transformer_lm", "train.py"), "--device", "cpu",
		"--seq-len", "32", "--vocab", "128", "--d-model", "32", "--layers", "2", "--heads", "4")
	checkRun(t, out, s, "3", 2)
}
