// Package procgroup holds what trials, warm workers and fork servers share
// about a child that leads its own process group: the attributes it is
// started with, the pipes of the worker's and the fork server's protocol,
// how its exit is noticed without reaping it, so that its pid (the group's
// id) stays reserved while the rest of the group is killed, and how the
// group is killed.
package procgroup

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batchfit/batchfit/internal/procfs"
)

// Attr returns the attributes for a child that leads its own process group.
// Setpgid: the child and its children are killable as a whole, and a
// terminal's Ctrl-C reaches batchfit, which stops them in order. Pdeathsig:
// if batchfit dies hard, the child dies too.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// KillGroup sends sig to every process of the group pgid. The error is
// kill(2)'s: ESRCH when no process is left in the group. A pgid below 2 is
// refused: kill(2) would read 1 (as -1) as every process batchfit may
// signal, 0 as batchfit's own group and a negative one as a single
// process, and a child whose pid was never known must not take batchfit,
// or the machine, down with it.
func KillGroup(pgid int, sig syscall.Signal) error {
	if pgid < 2 {
		return fmt.Errorf("kill process group %d: not a child's group", pgid)
	}
	return unix.Kill(-pgid, sig)
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

// Exited reports whether pid has exited: it is a zombie, or its stat
// cannot be read any more.
func Exited(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err != nil || st.Dead()
}

// StartPiped starts cmd leading its own process group (Attr) with two pipes
// to talk over: it reads requests on its fd 3 and writes replies on its fd
// 4, the protocol of the warm worker and the fork server. It returns
// batchfit's ends. os.Pipe makes them close-on-exec, so no other child of
// batchfit inherits them; the child's ends are closed here once it has
// them.
func StartPiped(cmd *exec.Cmd) (requests, replies *os.File, err error) {
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, nil, err
	}
	cmd.ExtraFiles = []*os.File{reqR, repW} // fds 3 and 4
	cmd.SysProcAttr = Attr()
	err = cmd.Start()
	reqR.Close()
	repW.Close()
	if err != nil {
		reqW.Close()
		repR.Close()
		return nil, nil, err
	}
	return reqW, repR, nil
}
