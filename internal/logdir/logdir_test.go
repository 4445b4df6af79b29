package logdir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchfit/batchfit/internal/hint"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		ok        bool
	}{
		{"unset", "", true},
		{"existing folder", dir, true},
		{"new nested folder", filepath.Join(dir, "a", "b"), true},
		{"a file", file, false},
		{"under a file", filepath.Join(file, "logs"), false},
		{"unwritable", "/proc/batchfit-logs", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.dir)
			var ce *hint.ConfigError
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && !errors.As(err, &ce):
				t.Fatalf("got %v, want a *hint.ConfigError", err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
		t.Error("the check created the folder")
	}
}
