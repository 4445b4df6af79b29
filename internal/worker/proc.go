package worker

import (
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/procgroup"
)

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
