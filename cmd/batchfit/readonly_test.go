package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyHistory: history and show read a history on a read-only file
// system; a search there is refused with the --no-db hint.
func TestReadOnlyHistory(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "batchfit.db")
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, _, stderr := cli("demo", "-q", "--db", db); code != exitFound {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	mnt := t.TempDir()
	if os.Geteuid() != 0 || exec.Command("mount", "--bind", dir, mnt).Run() != nil {
		t.Skip("needs root and mount to make a read-only file system")
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", mnt).CombinedOutput(); err != nil {
		t.Skipf("remount read-only: %v: %s", err, out)
	}
	ro := filepath.Join(mnt, "batchfit.db")
	if code, stdout, stderr := cli("history", "--db", ro); code != 0 || !strings.Contains(stdout, "batchfit demo") {
		t.Errorf("history: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, stderr := cli("show", "--db", ro, "latest"); code != 0 || !strings.Contains(stdout, "largest batch size that runs: 952") {
		t.Errorf("show: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := cli("demo", "--db", ro); code != exitError || !strings.Contains(stderr, "read-only file system") || !strings.Contains(stderr, "--no-db") {
		t.Errorf("demo: exit %d, stderr %q", code, stderr)
	}
}
