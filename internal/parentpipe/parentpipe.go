// Package parentpipe stops batchfit when the program that started it ends,
// however it ends: it watches an inherited pipe whose write end only that
// program holds, and cancels a context at the pipe's end.
package parentpipe

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
)

// Env names an inherited pipe whose write end the program that started
// batchfit holds (the Python API passes one). That end closes when the
// program dies, however it dies (SIGKILL too), and batchfit then stops as
// on Ctrl-C: it runs in a session of its own, so no signal of the
// program's terminal or process group would reach it.
const Env = "BATCHFIT_PARENT_FD"

// Watch returns a context that is canceled when the pipe whose file
// descriptor is fd (Env's value) reaches its end, and a function
// that stops the watch and closes the pipe. An empty fd watches nothing.
// Bytes written into the pipe are read and ignored; a read error counts as
// the end, since nothing is watched after it.
func Watch(ctx context.Context, fd string) (context.Context, func(), error) {
	if fd == "" {
		return ctx, func() {}, nil
	}
	n, err := strconv.Atoi(fd)
	if err != nil || n < 0 {
		return ctx, func() {}, fmt.Errorf("$%s=%q is not a file descriptor", Env, fd)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(n, &st); err != nil {
		return ctx, func() {}, fmt.Errorf("$%s=%d: %w", Env, n, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return ctx, func() {}, fmt.Errorf("$%s=%d is not a pipe", Env, n)
	}
	// The trials must not inherit the pipe; non-blocking, the read is in
	// the runtime's poller, and closing the file ends it.
	syscall.CloseOnExec(n)
	if err := syscall.SetNonblock(n, true); err != nil {
		return ctx, func() {}, fmt.Errorf("$%s=%d: %w", Env, n, err)
	}
	pipe := os.NewFile(uintptr(n), "parent pipe")
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, pipe)
		cancel()
	}()
	return ctx, func() {
		cancel()
		pipe.Close()
		<-done
	}, nil
}
