package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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

// checkLogDir refuses a --log-dir that openLogDir could not use, before
// anything runs (the framework's version probe included), without creating
// it: the folder, or the nearest folder above it that exists, must be a
// folder batchfit can create files in.
func checkLogDir(dir string) error {
	if dir == "" {
		return nil
	}
	hint := "pass a --log-dir you can write to"
	at := dir
	for {
		st, err := os.Stat(at)
		if err == nil {
			if !st.IsDir() {
				return configError(hint, "--log-dir %s: %s is not a folder", dir, at)
			}
			break
		}
		// Under a file, stat says "not a directory": the file is found
		// one level up.
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return configError(hint, "--log-dir %s: %v", dir, err)
		}
		up := filepath.Dir(at)
		if up == at {
			return configError(hint, "--log-dir %s: %v", dir, err)
		}
		at = up
	}
	f, err := os.CreateTemp(at, ".batchfit-check-")
	if err != nil {
		return configError(hint, "--log-dir %s is not writable: %v", dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}
