package adapter

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/batchfit/batchfit/python"
)

// Install writes the embedded Python package under dir (dir/batchfit/...) and
// returns the PYTHONPATH entries a trial needs, joined by the list separator:
// dir/batchfit/_hook first, so that Python runs its sitecustomize at start-up,
// then dir, so that the hook (and trial code) can import batchfit. Give it a
// directory of its own: everything in dir becomes importable by the trial.
//
// Install is idempotent: a file whose content is already right is left alone,
// and others are written to a temporary file and renamed into place, so a
// trial starting meanwhile never sees a half-written file.
func Install(dir string) (pythonPath string, err error) {
	return install(python.FS, dir)
}

func install(src fs.FS, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("install python adapter: %w", err)
	}
	err = fs.WalkDir(src, "batchfit", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skipped(d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		target := filepath.Join(abs, filepath.FromSlash(name))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(src, name)
		if err != nil {
			return err
		}
		return writeFile(target, data)
	})
	if err != nil {
		return "", fmt.Errorf("install python adapter in %s: %w", abs, err)
	}
	hook := filepath.Join(abs, "batchfit", "_hook")
	return hook + string(os.PathListSeparator) + abs, nil
}

// skipped reports build litter that a local run may leave in the source tree,
// which go:embed "all:" would otherwise carry along.
func skipped(name string) bool {
	return name == "__pycache__" || path.Ext(name) == ".pyc" ||
		(strings.HasPrefix(name, ".") && name != ".")
}

func writeFile(target string, data []byte) error {
	if old, err := os.ReadFile(target); err == nil && bytes.Equal(old, data) {
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(target), ".tmp-"+filepath.Base(target)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, target)
	}
	if werr != nil {
		os.Remove(tmp)
	}
	return werr
}
