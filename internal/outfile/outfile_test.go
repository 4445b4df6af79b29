package outfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/hint"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"new file", filepath.Join(dir, "r.html"), ""},
		{"existing file", file, ""},
		{"a folder", dir, "is a folder"},
		{"under a file", filepath.Join(file, "r.html"), "no such folder"},
		{"missing folder", filepath.Join(dir, "nope", "r.html"), "no such folder"},
		{"a device", os.DevNull, "not a regular file"},
		{"folder nobody can write", "/proc/r.html", "cannot write in the folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(Named{"--report", tc.path}, "batchfit.html")
			var ce *hint.ConfigError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			case err != nil && !errors.As(err, &ce):
				t.Fatalf("got %T, want a *hint.ConfigError (a usage error)", err)
			}
		})
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".batchfit-*"))
	if len(left) > 0 {
		t.Errorf("the check left %v behind", left)
	}
}

func TestCheckFolderSuggestsExample(t *testing.T) {
	dir := t.TempDir()
	err := Check(Named{"--plot", dir}, "batchfit.png")
	if want := "name a file, such as " + filepath.Join(dir, "batchfit.png"); hint.Of(err) != want {
		t.Errorf("hint %q, want %q", hint.Of(err), want)
	}
}

// TestCheckPermissions covers what root is not stopped by (the scripts run
// as root in CI): a read-only file and a read-only folder.
func TestCheckPermissions(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("permissions do not stop root")
	}
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro.html")
	if err := os.WriteFile(ro, []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := Check(Named{"--report", ro}, "batchfit.html"); err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Errorf("read-only file: %v", err)
	}
	roDir := filepath.Join(dir, "ro")
	if err := os.Mkdir(roDir, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := Check(Named{"--plot", filepath.Join(roDir, "p.png")}, "batchfit.png"); err == nil || !strings.Contains(err.Error(), "cannot write in the folder") {
		t.Errorf("read-only folder: %v", err)
	}
}

func TestDistinct(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "batchfit.db")
	if err := os.WriteFile(db, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(db, filepath.Join(dir, "link.db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(db, filepath.Join(dir, "hard.db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	history := Named{"the history (--db)", db}
	for _, tc := range []struct {
		name  string
		paths []Named
		same  bool
	}{
		{"different files", []Named{history, {"--report", filepath.Join(dir, "r.html")}}, false},
		{"empty paths", []Named{{"--report", ""}, {"--plot", ""}}, false},
		{"same path", []Named{{"--report", "x.svg"}, {"--plot", "x.svg"}}, true},
		{"spelt two ways", []Named{history, {"--report", filepath.Join(dir, ".", "x", "..", "batchfit.db")}}, true},
		{"relative and absolute", []Named{{"--report", "r.html"}, {"--plot", filepath.Join(mustGetwd(t), "r.html")}}, true},
		{"through a symbolic link", []Named{history, {"--report", filepath.Join(dir, "link.db")}}, true},
		{"a file not written yet through a linked folder", []Named{{"--report", filepath.Join(dir, "sub", "new.svg")}, {"--plot", filepath.Join(dir, "new.svg")}}, true},
		{"a hard link", []Named{history, {"--report", filepath.Join(dir, "hard.db")}}, true},
		{"one flag's own names", []Named{history, {"the history (--db)", db + "-wal"}, {"the history (--db)", db}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Distinct(tc.paths...)
			var ce *hint.ConfigError
			switch {
			case !tc.same && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.same && (err == nil || !strings.Contains(err.Error(), "name the same file")):
				t.Fatalf("got %v, want the same file refused", err)
			case tc.same && !errors.As(err, &ce):
				t.Fatalf("got %T, want a *hint.ConfigError (a usage error)", err)
			}
		})
	}
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.html")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A write that fails leaves the old file as it was.
	failed := errors.New("disk full")
	err := WriteAtomic(path, func(w io.Writer) error {
		io.WriteString(w, "half")
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("err = %v, want %v", err, failed)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("after a failed write the file holds %q, want %q", got, "old")
	}
	// A write that succeeds replaces it whole, readable by others.
	if err := WriteAtomic(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Errorf("the file holds %q, want %q", got, "new")
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v), want 0644", st.Mode().Perm(), err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".batchfit-*"))
	if len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestWithSuffix(t *testing.T) {
	for _, tc := range []struct{ path, suffix, want string }{
		{"run.html", "NVIDIA H100 80GB HBM3", "run-NVIDIA_H100_80GB_HBM3.html"},
		{"out/chart.png", "A100-SXM4/40GB", "out/chart-A100-SXM4_40GB.png"},
		{"report", "L4", "report-L4"},
	} {
		if got := WithSuffix(tc.path, tc.suffix); got != tc.want {
			t.Errorf("WithSuffix(%q, %q) = %q, want %q", tc.path, tc.suffix, got, tc.want)
		}
	}
}
