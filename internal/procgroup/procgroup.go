// Package procgroup holds what trials, warm workers and fork servers share
// about a child that leads its own process group: the attributes it is
// started with, the pipes of the worker's and the fork server's protocol,
// how its exit is noticed without reaping it, so that its pid (the group's
// id) stays reserved while the rest of the group is killed, and how the
// group is killed. All of it needs Linux; elsewhere CheckPlatform refuses.
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

// ReapGroup collects members of the group pgid that were re-parented to
// batchfit (it is a child subreaper once a trial has run) and have exited
// or are exiting, waiting up to a second, so that they do not stay zombies:
// a killed worker's children, a fork server's process that took over from
// the one batchfit started. Without subreaping there are none: ECHILD at
// once. The group's leader, batchfit's own child, is reaped by its
// exec.Cmd before.
func ReapGroup(pgid int) {
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-pgid, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return // ECHILD: none left
		case pid == 0:
			time.Sleep(10 * time.Millisecond)
		}
	}
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
	if err := CheckPlatform(); err != nil {
		return nil, nil, err
	}
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
