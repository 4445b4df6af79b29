package trial

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/testutil/fulldisk"
)

func TestReadTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		from int64
		n    int
		want string
		null bool
	}{
		{"last bytes", path, 0, 4, "6789", false},
		{"more than the file", path, 0, 100, "0123456789", false},
		{"not before from", path, 8, 4, "89", false},
		{"from before the tail", path, 2, 4, "6789", false},
		{"from at the end", path, 10, 4, "", false},
		{"from past the end", path, 20, 4, "", false},
		{"no file", filepath.Join(t.TempDir(), "missing"), 0, 4, "", true},
		{"no path", "", 0, 4, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReadTail(tt.path, tt.from, tt.n)
			if string(got) != tt.want || (got == nil) != tt.null {
				t.Errorf("ReadTail(%q, %d, %d) = %q (nil %v), want %q (nil %v)",
					tt.path, tt.from, tt.n, got, got == nil, tt.want, tt.null)
			}
		})
	}
}

func TestOpenLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	if err := os.WriteFile(path, []byte("an earlier run"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, temp, err := OpenLog(path, "batchfit-test-*")
	if err != nil {
		t.Fatalf("OpenLog(%q): %v", path, err)
	}
	f.Close()
	if temp {
		t.Error("OpenLog with a path says the file is temporary")
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("log at %q not truncated: %v, %v", path, fi, err)
	}

	f, temp, err = OpenLog("", "batchfit-test-*")
	if err != nil {
		t.Fatalf("OpenLog without a path: %v", err)
	}
	f.Close()
	defer os.Remove(f.Name())
	if !temp {
		t.Error("OpenLog without a path does not say the file is temporary")
	}
	if m, _ := filepath.Match("batchfit-test-*", filepath.Base(f.Name())); !m {
		t.Errorf("temporary log %q not named after its pattern", f.Name())
	}
}

// A log that cannot be written decides nothing: the OOM a trainer printed
// is found in the stream as it came, the tail holds it, and the write
// error is the trial's, with the log's path. Both a device that refuses
// every write (/dev/full) and a real full disk (a tmpfs filled to its last
// block; skipped where mounting is not permitted) are tried.
func TestLogWriteFails(t *testing.T) {
	for _, tt := range []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"dev full", nil},
		{"full tmpfs", fullDisk},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, stderr := t.TempDir(), "/dev/full"
			if tt.dir != nil {
				dir = tt.dir(t)
				stderr = filepath.Join(dir, "trial-3.stderr")
			}
			spec := Spec{
				Argv:       []string{"testdata/oomafter60k.sh"},
				StdoutPath: filepath.Join(dir, "trial-3.stdout"),
				StderrPath: stderr,
			}
			res, err := Run(context.Background(), spec, nil)
			var le *LogError
			if !errors.As(err, &le) || le.Path != stderr || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Run: %v, want a *LogError for %s: no space left on device", err, stderr)
			}
			if want := "write trial log " + stderr + ": no space left on device"; err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
			if res.ExitCode != 0 || res.PID == 0 {
				t.Fatalf("result %+v", res)
			}
			if got := classifyRes(res); got.Outcome != classify.OOM {
				t.Errorf("classified as %s (%s), want oom", got.Outcome, got.Reason)
			}
			if !bytes.Contains(res.StderrTail, []byte("torch.OutOfMemoryError: CUDA out of memory.")) {
				t.Errorf("stderr tail ends %q", res.StderrTail[max(0, len(res.StderrTail)-200):])
			}
		})
	}
}

// fullDisk returns a folder on a full tmpfs, unmounted when the test ends;
// it skips the test where mounting is not permitted.
func fullDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	unmount, err := fulldisk.Mount(dir)
	if errors.Is(err, fulldisk.ErrNotPermitted) {
		t.Skipf("%v; the /dev/full case covers the same path", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unmount(); err != nil {
			t.Error(err)
		}
	})
	return dir
}
