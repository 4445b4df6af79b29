package procgroup

import (
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CheckPlatform says whether batchfit can start and control trials, warm
// workers and fork servers here: on Linux it can.
func CheckPlatform() error { return nil }

// Attr returns the attributes for a child that leads its own process group.
// Setpgid: the child and its children are killable as a whole, and a
// terminal's Ctrl-C reaches batchfit, which stops them in order. Pdeathsig:
// if batchfit dies hard, the child dies too.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// WaitExit reports when the child pid has exited, without reaping it
// (WNOWAIT): the zombie keeps the pid, which is also the group id, reserved
// until its caller has killed the rest of the group and reaps it.
func WaitExit(pid int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err == nil {
				return
			}
			if err != unix.EINTR {
				break
			}
		}
		// A kernel without WNOWAIT (a sandbox's): watch for the zombie
		// instead. pid is an unreaped child, so it cannot vanish or be
		// reused meanwhile.
		for !Exited(pid) {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return done
}

var subreaperOnce sync.Once

// BecomeSubreaper makes orphans of batchfit's children reparent to
// batchfit instead of init, so they stay findable (and reapable) until
// their trial's cleanup, and a fork server's backup that took over dies
// with batchfit (its parent-death signal, set once re-parented). It is
// process-wide and done once.
func BecomeSubreaper() {
	subreaperOnce.Do(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}
