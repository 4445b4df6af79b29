package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/hint"
)

// latestLink names, in a --log-dir, the folder of the newest run there.
const latestLink = "latest"

// openLogDir returns the folder for trial logs and whether to keep it: a
// new folder of this run's own in the user's folder (kept), or a new
// temporary one under base ("": the system's), removed unless the run ends
// unexpectedly. Each run gets its own folder because the history points at
// every run's logs: a later run writing the same trial names into the same
// folder would make an old run's record show the new run's output.
// dir/latest links to the newest run's folder.
func openLogDir(dir, base string, started time.Time) (string, bool, error) {
	if dir == "" {
		return tempLogDir(base)
	}
	fix := "pass a --log-dir you can write to"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, hint.Configf(fix, "--log-dir: %v", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, hint.Configf(fix, "--log-dir %s: %v", dir, err)
	}
	run, err := os.MkdirTemp(abs, "run-"+started.Format("20060102-150405")+"-")
	if err != nil {
		return "", false, hint.Configf(fix, "--log-dir %s is not writable: %v", dir, errors.Unwrap(err))
	}
	if err := os.Chmod(run, 0o755); err != nil {
		os.Remove(run)
		return "", false, hint.Configf(fix, "--log-dir %s: %v", dir, err)
	}
	linkLatest(abs, filepath.Base(run))
	return run, true, nil
}

// linkLatest points dir/latest at name, replacing an older link in one
// rename. It is a convenience: where links cannot be made, there is none.
func linkLatest(dir, name string) {
	link := filepath.Join(dir, latestLink)
	if st, err := os.Lstat(link); err == nil && st.Mode()&os.ModeSymlink == 0 {
		return // the user's own file or folder
	}
	tmp := filepath.Join(dir, ".batchfit-latest-"+name)
	if err := os.Symlink(name, tmp); err != nil {
		return
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
	}
}

func tempLogDir(base string) (string, bool, error) {
	fix := "set TMPDIR to a writable folder, or pass --log-dir"
	if base != "" {
		fix = "pass --log-dir on a folder the trials can see"
		if err := os.MkdirAll(base, 0o755); err != nil {
			return "", false, hint.With(fmt.Errorf("create a folder for trial logs: %w", err), fix)
		}
	}
	dir, err := os.MkdirTemp(base, "batchfit-")
	if err != nil {
		return "", false, hint.With(fmt.Errorf("create a folder for trial logs: %w", err), fix)
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
	fix := "pass a --log-dir you can write to"
	at := dir
	for {
		st, err := os.Stat(at)
		if err == nil {
			if !st.IsDir() {
				return hint.Configf(fix, "--log-dir %s: %s is not a folder", dir, at)
			}
			break
		}
		// Under a file, stat says "not a directory": the file is found
		// one level up.
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return hint.Configf(fix, "--log-dir %s: %v", dir, err)
		}
		up := filepath.Dir(at)
		if up == at {
			return hint.Configf(fix, "--log-dir %s: %v", dir, err)
		}
		at = up
	}
	f, err := os.CreateTemp(at, ".batchfit-check-")
	if err != nil {
		return hint.Configf(fix, "--log-dir %s is not writable: %v", dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}
