package parentpipe

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/testutil"
)

func TestWatch(t *testing.T) {
	t.Run("the end of the pipe cancels", func(t *testing.T) {
		fd, w := testutil.ParentPipe(t)
		ctx, unwatch, err := Watch(context.Background(), fd)
		if err != nil {
			t.Fatal(err)
		}
		defer unwatch()
		// What the parent writes is not its end.
		if _, err := w.WriteString("still here\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("canceled while the parent holds the pipe")
		case <-time.After(200 * time.Millisecond):
		}
		w.Close()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("not canceled 5 s after the parent's end closed")
		}
		if flags, err := fcntl(fd, syscall.F_GETFD); err != nil || flags&syscall.FD_CLOEXEC == 0 {
			t.Errorf("the pipe is inherited by trials: flags %#x, %v", flags, err)
		}
	})

	t.Run("unwatch stops the read", func(t *testing.T) {
		fd, _ := testutil.ParentPipe(t)
		ctx, unwatch, err := Watch(context.Background(), fd)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { unwatch(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("unwatch blocked on the read")
		}
		if ctx.Err() == nil {
			t.Error("the context outlives the watch")
		}
	})

	t.Run("none", func(t *testing.T) {
		ctx := context.Background()
		got, unwatch, err := Watch(ctx, "")
		unwatch()
		if err != nil || got != ctx {
			t.Errorf("without a pipe: %v, context replaced %v", err, got != ctx)
		}
	})

	file, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, tc := range []struct{ fd, want string }{
		{"x", `$BATCHFIT_PARENT_FD="x" is not a file descriptor`},
		{"-1", `$BATCHFIT_PARENT_FD="-1" is not a file descriptor`},
		{"100000", "$BATCHFIT_PARENT_FD=100000: bad file descriptor"},
		{strconv.Itoa(int(file.Fd())), "is not a pipe"},
	} {
		t.Run(tc.fd, func(t *testing.T) {
			_, unwatch, err := Watch(context.Background(), tc.fd)
			unwatch()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func fcntl(fd string, cmd int) (int, error) {
	n, _ := strconv.Atoi(fd)
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(n), uintptr(cmd), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
