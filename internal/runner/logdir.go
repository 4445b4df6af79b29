package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// openLogDir returns the folder for trial logs and whether to keep it: the
// user's folder (kept), or a new temporary one under base ("": the
// system's), removed unless the run ends unexpectedly.
func openLogDir(dir, base string) (string, bool, error) {
	if dir == "" {
		return tempLogDir(base)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, configError("pass a --log-dir you can write to", "--log-dir: %v", err)
	}
	f, err := os.CreateTemp(dir, ".batchfit-check-")
	if err != nil {
		return "", false, configError("pass a --log-dir you can write to", "--log-dir %s is not writable: %v", dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	abs, _ := filepath.Abs(dir)
	return abs, true, nil
}

func tempLogDir(base string) (string, bool, error) {
	hint := "set TMPDIR to a writable folder, or pass --log-dir"
	if base != "" {
		hint = "pass --log-dir on a folder the trials can see"
		if err := os.MkdirAll(base, 0o755); err != nil {
			return "", false, withHint(fmt.Errorf("create a folder for trial logs: %w", err), hint)
		}
	}
	dir, err := os.MkdirTemp(base, "batchfit-")
	if err != nil {
		return "", false, withHint(fmt.Errorf("create a folder for trial logs: %w", err), hint)
	}
	return dir, false, nil
}
