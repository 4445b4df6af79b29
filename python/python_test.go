package python

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPythonAPI runs the Python API's unit tests (python/tests), end to end
// too: through a batchfit built from this tree, on its simulated GPU.
func TestPythonAPI(t *testing.T) {
	py := python(t)
	bin := filepath.Join(t.TempDir(), "batchfit")
	build := exec.Command("go", "build", "-o", bin, "github.com/batchfit/batchfit/cmd/batchfit")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-v", "-s", "tests")
	cmd.Env = append(os.Environ(), "BATCHFIT_TEST_BINARY="+bin, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// python returns the interpreter for the tests: BATCHFIT_TEST_PYTHON, else
// Debian's /usr/bin/python3 (whose venv module scripts/test installs), else
// python3 on PATH.
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("BATCHFIT_TEST_PYTHON"), "/usr/bin/python3"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	return p
}
