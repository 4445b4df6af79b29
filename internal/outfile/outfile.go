// Package outfile keeps a run's output files (the HTML report, the chart)
// safe: each is checked before any trial runs, so that none collides with
// the history, the log folder or another output however its path is spelt,
// and each is written whole through a rename, so that nothing is left
// half-written.
package outfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/batchfit/batchfit/internal/hint"
)

// Named is a path and the flag (or the name) it came from, which messages
// quote.
type Named struct{ Flag, Path string }

// Distinct refuses two of paths (those not "") that name the same file: the
// same path spelt two ways, through a symbolic link, or a hard link of an
// existing file. Paths of one flag may name one file: they are one file's
// own names, such as the history's. The error is a *hint.ConfigError.
func Distinct(paths ...Named) error {
	for i, a := range paths {
		for _, b := range paths[i+1:] {
			if a.Path == "" || b.Path == "" || !samePath(a.Path, b.Path) {
				continue
			}
			if a.Flag == b.Flag {
				continue
			}
			return hint.Configf(fmt.Sprintf("give %s another file", a.Flag),
				"%s and %s name the same file %s", a.Flag, b.Flag, a.Path)
		}
	}
	return nil
}

// samePath reports whether a and b are one file, existing or not.
func samePath(a, b string) bool {
	if canonicalPath(a) == canonicalPath(b) {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// canonicalPath is path made absolute with the links in it resolved, as
// far as they exist: a file not written yet is its resolved folder and its
// name.
func canonicalPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		return p
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// Check refuses a path that WriteAtomic could not write at the end of a
// search: a folder (or a device, which a rename would replace), a file its
// owner made read-only, or a folder batchfit cannot create a file in.
// example is a file name to suggest when path is a folder. It leaves
// nothing behind. The error is a *hint.ConfigError.
func Check(out Named, example string) error {
	flag, path := out.Flag, out.Path
	fix := "choose a file path in a folder you can write to"
	if st, err := os.Stat(path); err == nil {
		switch {
		case st.IsDir():
			return hint.Configf("name a file, such as "+filepath.Join(path, example), "%s %s is a folder", flag, path)
		case !st.Mode().IsRegular():
			return hint.Configf(fix, "%s %s is not a regular file", flag, path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return hint.Configf(fix, "%s %s is not writable: %v", flag, path, errors.Unwrap(err))
		}
		f.Close()
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return hint.Configf("create the folder first, or choose another path", "%s %s: no such folder %s", flag, path, dir)
	}
	f, err := os.CreateTemp(dir, ".batchfit-check-*")
	if err != nil {
		return hint.Configf(fix, "%s %s: cannot write in the folder %s: %v", flag, path, dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// WriteAtomic writes through a temporary file in path's folder renamed
// into place, so that path is the whole output or what it was before.
func WriteAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".batchfit-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// WithSuffix is path with "-" and suffix before its extension, suffix kept
// to letters, digits, '.', '-' and '_' (a GPU model's name, for one file
// per model).
func WithSuffix(path, suffix string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + fileSafe(suffix) + ext
}

// fileSafe keeps letters, digits, '.', '-' and '_' of s.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}
