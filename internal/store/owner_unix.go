//go:build unix

package store

import (
	"errors"
	"syscall"
)

// processExists reports whether a process with this pid exists. EPERM means
// it does, owned by someone else.
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
