package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestOpenReadOnly reads a history that cannot be written: on a read-only
// file system (a read-only bind mount, where this test may mount one) and,
// everywhere, a writable file opened read-only, which refuses writes.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	r := sampleRun()
	if err := s.BeginRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	s.Close()

	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	runs, err := ro.List(ctx, 0)
	if err != nil || len(runs) != 1 || runs[0].ID != r.ID {
		t.Fatalf("List = %v, %v; want run %s", runs, err, r.ID)
	}
	if err := ro.BeginRun(ctx, sampleRun()); err == nil {
		t.Error("a read-only store took a write")
	}
	ro.Close()

	t.Run("read-only file system", func(t *testing.T) {
		mnt := t.TempDir()
		if os.Geteuid() != 0 || exec.Command("mount", "--bind", filepath.Dir(path), mnt).Run() != nil {
			t.Skip("needs root and mount to make a read-only file system")
		}
		t.Cleanup(func() { exec.Command("umount", mnt).Run() })
		if out, err := exec.Command("mount", "-o", "remount,ro,bind", mnt).CombinedOutput(); err != nil {
			t.Skipf("remount read-only: %v: %s", err, out)
		}
		rofs := filepath.Join(mnt, filepath.Base(path))
		if _, err := Open(ctx, rofs); err == nil {
			t.Fatal("Open for writing succeeded on a read-only file system")
		}
		ro, err := OpenReadOnly(ctx, rofs)
		if err != nil {
			t.Fatalf("OpenReadOnly: %v", err)
		}
		defer ro.Close()
		if runs, err := ro.List(ctx, 0); err != nil || len(runs) != 1 {
			t.Fatalf("List = %v, %v", runs, err)
		}
	})
}

// TestOpenReadOnlyRefuses: what a read-only open cannot read as it is.
func TestOpenReadOnlyRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		version int
		want    error
	}{
		{"an older schema", len(migrations) - 1, ErrOlder},
		{"a newer schema", len(migrations) + 1, ErrNewer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, path := openTemp(t)
			s.Close()
			if _, err := rawDB(t, path).Exec(fmt.Sprintf("PRAGMA user_version=%d", tc.version)); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenReadOnly(ctx, path); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("not a database", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.db")
		if err := os.WriteFile(path, []byte("not a database, and never to be written"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenReadOnly(ctx, path); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err = %v, want ErrCorrupt", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "none.db")
		if _, err := OpenReadOnly(ctx, path); err == nil {
			t.Fatal("opened a file that does not exist")
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the read-only open created %s", path)
		}
	})
}
