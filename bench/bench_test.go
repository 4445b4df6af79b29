package bench

import (
	"os"
	"os/exec"
	"testing"

	"github.com/batchfit/batchfit/internal/testutil"
)

// TestScripts runs the bench scripts' unit tests (test_*.py) with Debian's
// CPU torch, which scripts/test installs: the parts that need no GPU.
func TestScripts(t *testing.T) {
	testutil.NeedsFull(t, "Python with torch")
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import torch").Run() != nil {
		t.Skip("no /usr/bin/python3 with torch (scripts/test installs python3-torch)")
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-v", "-s", ".", "-p", "test_*.py")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
