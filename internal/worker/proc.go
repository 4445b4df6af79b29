package worker

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	if syscall.Kill(-pgid, syscall.SIGKILL) != nil {
		return // ESRCH: nobody left
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
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// After the parenthesized command: state ppid pgrp ...
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err == nil && g == pgid && pid > 0 {
			return true
		}
	}
	return false
}
