// Package logdir makes the folder of a run's trial logs: one of its own in
// the user's --log-dir, kept, with a link to the newest; or a temporary
// one, removed unless the run ends unexpectedly.
package logdir

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

// Open returns the folder for trial logs and whether to keep it: a
// new folder of this run's own in the user's folder (kept), or a new
// temporary one under base ("": the system's), removed unless the run ends
// unexpectedly. Each run gets its own folder because the history points at
// every run's logs: a later run writing the same trial names into the same
// folder would make an old run's record show the new run's output.
// dir/latest links to the newest run's folder.
func Open(dir, base string, started time.Time) (string, bool, error) {
	if dir == "" {
		return temp(base)
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

// temp makes a temporary folder under base ("": the system's).
func temp(base string) (string, bool, error) {
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

// Check refuses a --log-dir that Open could not use, before
// anything runs (the framework's version probe included), without creating
// it: the folder, or the nearest folder above it that exists, must be a
// folder batchfit can create files in.
func Check(dir string) error {
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
