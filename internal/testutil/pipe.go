package testutil

import (
	"os"
	"strconv"
	"syscall"
	"testing"
)

// ParentPipe is a pipe as the Python API passes it to batchfit
// (BATCHFIT_PARENT_FD): a plain (blocking) read end by number, and the
// write end the parent holds, which no child inherits (or the pipe would
// not end while a trial runs). The write end is closed when t ends.
func ParentPipe(t testing.TB) (fd string, w *os.File) {
	t.Helper()
	var p [2]int
	syscall.ForkLock.RLock()
	err := syscall.Pipe(p[:])
	if err == nil {
		syscall.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	w = os.NewFile(uintptr(p[1]), "write end")
	t.Cleanup(func() { w.Close() })
	return strconv.Itoa(p[0]), w
}
