package adapter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

func TestInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "adapter")
	pythonPath, err := Install(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "batchfit", "_hook") + string(os.PathListSeparator) + dir
	if pythonPath != want {
		t.Errorf("python path = %q, want %q", pythonPath, want)
	}
	files := []string{"batchfit/__init__.py", "batchfit/hook.py", "batchfit/_hook/sitecustomize.py"}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s mode = %v, want 0644", f, fi.Mode().Perm())
		}
	}

	// A second install changes nothing and repairs what was damaged.
	hook := filepath.Join(dir, "batchfit", "hook.py")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(hook, old, old); err != nil {
		t.Fatal(err)
	}
	init := filepath.Join(dir, "batchfit", "__init__.py")
	if err := os.WriteFile(init, []byte("broken"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := Install(dir)
	if err != nil || again != pythonPath {
		t.Fatalf("second install = %q, %v", again, err)
	}
	if fi, err := os.Stat(hook); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("an unchanged file was rewritten (%v)", err)
	}
	if b, err := os.ReadFile(init); err != nil || string(b) == "broken" {
		t.Errorf("a damaged file was not repaired (%v)", err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "batchfit"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestInstallSkipsBuildLitter(t *testing.T) {
	src := fstest.MapFS{
		"batchfit/__init__.py":                      {Data: []byte("")},
		"batchfit/__pycache__/hook.cpython-311.pyc": {Data: []byte("x")},
		"batchfit/_hook/sitecustomize.py":           {Data: []byte("")},
		"batchfit/_hook/old.pyc":                    {Data: []byte("x")},
		"batchfit/.DS_Store":                        {Data: []byte("x")},
	}
	dir := t.TempDir()
	if _, err := install(src, dir); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	want := "batchfit/__init__.py batchfit/_hook/sitecustomize.py"
	if strings.Join(got, " ") != want {
		t.Errorf("installed %q, want %q", got, want)
	}
}

func TestInstallError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(filepath.Join(file, "sub")); err == nil {
		t.Error("install under a regular file succeeded")
	}
}
