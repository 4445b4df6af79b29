package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckOutputFile(t *testing.T) {
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
			err := checkOutputFile("--report", tc.path)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			case err != nil && exitCode(err) != exitUsage:
				t.Fatalf("exit code %d, want %d", exitCode(err), exitUsage)
			}
		})
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".batchfit-*"))
	if len(left) > 0 {
		t.Errorf("the check left %v behind", left)
	}
}

// TestCheckOutputFilePermissions covers what root is not stopped by (the
// scripts run as root in CI): a read-only file and a read-only folder.
func TestCheckOutputFilePermissions(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("permissions do not stop root")
	}
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro.html")
	if err := os.WriteFile(ro, []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := checkOutputFile("--report", ro); err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Errorf("read-only file: %v", err)
	}
	roDir := filepath.Join(dir, "ro")
	if err := os.Mkdir(roDir, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := checkOutputFile("--plot", filepath.Join(roDir, "p.png")); err == nil || !strings.Contains(err.Error(), "cannot write in the folder") {
		t.Errorf("read-only folder: %v", err)
	}
}

func TestOutputsSamePath(t *testing.T) {
	o := outputOptions{reportPath: "x.svg", plotPath: "x.svg"}
	if err := o.check(); err == nil || !strings.Contains(err.Error(), "same file") {
		t.Errorf("got %v", err)
	}
}
