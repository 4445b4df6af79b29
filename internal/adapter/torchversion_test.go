package adapter

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestTorchVersionWithoutImportingTorch(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3 (scripts/test installs python3-torch)")
	}
	if TorchVersion(context.Background(), []string{py, "-c", "pass"}) == "" {
		t.Skip("/usr/bin/python3 has no torch (scripts/test installs python3-torch)")
	}
	// A console script whose #! names the interpreter.
	script := filepath.Join(t.TempDir(), "launcher")
	os.WriteFile(script, []byte("#!"+py+"\nprint('hi')\n"), 0o755)
	if v := TorchVersion(context.Background(), []string{script}); v == "" {
		t.Errorf("TorchVersion(console script) is empty")
	}
	if v := TorchVersion(context.Background(), []string{"/bin/sh", "-c", "true"}); v != "" {
		t.Errorf("TorchVersion(sh) = %q, want empty", v)
	}
}
