package worker

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/procgroup"
)

// reapGroup collects members of the killed group pgid that were re-parented
// to batchfit (it is a child subreaper once a trial has run), so that they
// do not stay zombies. Without subreaping there are none: ECHILD at once.
func reapGroup(pgid int) {
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

// killGroup sends SIGKILL to the process group pgid and waits (up to a
// second) until none of its members runs any more, so that a caller who
// sees the worker gone can rely on its children being gone too.
func killGroup(pgid int) {
	if procgroup.KillGroup(pgid, syscall.SIGKILL) != nil {
		return // ESRCH: nobody left (or pgid was no child's group)
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && groupRunning(pgid) {
		time.Sleep(5 * time.Millisecond)
	}
}

// groupRunning reports whether a process of group pgid is still running
// (not a zombie). It reads every /proc/PID/stat, which is cheap next to a
// worker's life and happens once per worker.
func groupRunning(pgid int) bool {
	pids, _ := procfs.PIDs()
	for _, pid := range pids {
		if st, err := procfs.ReadStat(pid); err == nil && st.PGRP == pgid && !st.Dead() {
			return true
		}
	}
	return false
}
