package examples

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/testutil"
)

// python returns an interpreter that has the given modules, or skips the
// test. BATCHFIT_TEST_PYTHON names one explicitly; /usr/bin/python3 comes
// next because a pyenv python3 earlier on PATH usually lacks torch.
func python(t *testing.T, modules ...string) string {
	t.Helper()
	testutil.NeedsFull(t, "Python with "+strings.Join(modules, " and "))
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

// runPlain runs an example without batchfit's adapter, with env added to
// the environment, and returns its exit status and output: the behaviour of
// the program itself.
func runPlain(t *testing.T, py string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(py, args...)
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// caughtOOM is the caught_oom example, small enough for a CPU.
func caughtOOM(batch, form string, extra ...string) []string {
	return append([]string{filepath.Join("caught_oom", "train.py"), "--device", "cpu", "--image-size", "32",
		"--batch-size", batch, "--steps", "2", "--on-oom", form}, extra...)
}

func TestCaughtOOMFitsCPU(t *testing.T) {
	t.Parallel()
	py := python(t, "torch", "torchvision")
	for _, form := range []string{"raise", "exit0", "exit3"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			// At the simulated limit itself the batch still fits.
			out, s := runTrial(t, py, "2", "2", caughtOOM("2", form, "--simulate-oom-above", "2")...)
			checkRun(t, out, s, "2", 2)
		})
	}
}

// A CPU cannot run out of GPU memory, so --simulate-oom-above raises
// torch.cuda.OutOfMemoryError where a GPU would; each form must then end as
// its documentation says.
func TestCaughtOOMFormsCPU(t *testing.T) {
	t.Parallel()
	py := python(t, "torch", "torchvision")
	tests := []struct {
		form      string
		code      int
		stdout    []string
		stderrOOM bool // the error is on stderr
	}{
		{form: "raise", code: 1, stderrOOM: true},
		{form: "exit0", code: 0, stdout: []string{"step 1/2 batch 3 skipped", "step 2/2 batch 3 skipped"}},
		{form: "exit3", code: 3},
	}
	for _, tt := range tests {
		t.Run(tt.form, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runPlain(t, py, nil, caughtOOM("3", tt.form, "--simulate-oom-above", "2")...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			mentions := func(s string) bool {
				l := strings.ToLower(s)
				return strings.Contains(l, "memory") || strings.Contains(l, "traceback")
			}
			if tt.stderrOOM {
				if !strings.Contains(stderr, "OutOfMemoryError: CUDA out of memory. Tried to allocate") {
					t.Errorf("stderr does not end with the out-of-memory error:\n%s", stderr)
				}
			} else if mentions(stderr) {
				t.Errorf("stderr mentions the error, and must not:\n%s", stderr)
			}
			if mentions(stdout) {
				t.Errorf("stdout mentions the error, and must not:\n%s", stdout)
			}
			var lines []string
			if s := strings.TrimSpace(stdout); s != "" {
				lines = strings.Split(s, "\n")
			}
			if !slices.Equal(lines, tt.stdout) {
				t.Errorf("stdout lines = %q, want %q", lines, tt.stdout)
			}
		})
	}
}

// JAX, transformers and Lightning have no Debian package, so where CI runs
// their examples and batchfit's callbacks are only compiled; the tests below
// run them wherever the packages are (BATCHFIT_TEST_PYTHON), and
// bench/gpu_examples.sh and bench/zoo.py run them on a GPU.
func TestJAXHFAndLightningScriptsCompile(t *testing.T) {
	t.Parallel()
	py := python(t)
	for _, script := range []string{filepath.Join("jax_optax", "train.py"), filepath.Join("hf_trainer", "train.py"),
		filepath.Join("hf_trainer", "oneline.py"), filepath.Join("lightning_resnet", "train.py"),
		filepath.Join("lightning_resnet", "oneline.py"), filepath.Join("..", "python", "batchfit", "lightning.py"),
		filepath.Join("..", "python", "batchfit", "hf.py")} {
		cmd := exec.Command(py, "-m", "py_compile", script)
		cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s does not compile: %v\n%s", script, err, out)
		}
	}
}

func checkSteps(t *testing.T, stdout, batch string, steps int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != steps {
		t.Errorf("printed %d lines, want one per step (%d):\n%s", len(lines), steps, stdout)
	}
	for i, l := range lines {
		if want := fmt.Sprintf("step %d/%d batch %s loss ", i+1, steps, batch); !strings.HasPrefix(l, want) {
			t.Errorf("step line %q does not start with %q", l, want)
		}
	}
}

func TestJAXOptaxCPU(t *testing.T) {
	t.Parallel()
	py := python(t, "jax", "optax")
	code, stdout, stderr := runPlain(t, py, []string{"JAX_PLATFORMS=cpu"}, filepath.Join("jax_optax", "train.py"), "--batch-size", "2", "--steps", "2",
		"--seq-len", "16", "--vocab", "64", "--d-model", "32", "--layers", "2", "--heads", "4")
	if code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	checkSteps(t, stdout, "2", 2)
}

func TestHFTrainerCPU(t *testing.T) {
	t.Parallel()
	py := python(t, "torch", "transformers", "accelerate")
	code, stdout, stderr := runPlain(t, py, nil, filepath.Join("hf_trainer", "train.py"), "--output_dir", t.TempDir(),
		"--per_device_train_batch_size", "2", "--max_steps", "2", "--use_cpu", "--report_to", "none",
		"--save_strategy", "no", "--vocab_size", "128", "--hidden_size", "32", "--intermediate_size", "64",
		"--num_hidden_layers", "2", "--num_attention_heads", "4", "--seq_len", "16", "--num_samples", "64")
	if code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "train_loss") {
		t.Errorf("stdout has no train_loss metric:\n%s", stdout)
	}
}
