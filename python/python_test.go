package python

import (
	"os/exec"
	"testing"
)

// TestPythonUnittests runs the unit tests of the Python package (tests/,
// standard library only) with the system's python3.
func TestPythonUnittests(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	out, err := exec.Command(py, "-m", "unittest", "discover", "-s", "tests").CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
