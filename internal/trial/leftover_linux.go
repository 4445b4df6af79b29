package trial

import (
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/procfs"
)

// Stop kills (SIGKILL) whatever is left of a trial whose batchfit died:
// everything in its cgroup, which it then removes; the processes of its
// process group, unless the group id now names another process's group;
// the processes that carry its cookie; and the descendants of all those.
// It waits (a bounded time) for them to die and returns how many it killed.
// It must not be called for a trial its batchfit still runs.
func Stop(p Process) int {
	killed := map[procKey]bool{}
	deadline := time.Now().Add(cleanupBudget)
	t := newTracker(p.PID, p.Cookie)
	if isTrialCgroup(p.Cgroup) {
		var live []procfs.Stat
		for _, pid := range cgroupPIDs(p.Cgroup) {
			if st, err := procfs.ReadStat(pid); err == nil && !st.Dead() {
				killed[keyOf(st)] = true
				live = append(live, st)
			}
		}
		_ = removeCgroup(p.Cgroup, time.Until(deadline))
		t.waitGone(live, deadline)
	}
	for round := 0; round < 5; round++ {
		live := t.recorded(p)
		if len(live) == 0 {
			break
		}
		for _, st := range live {
			killed[keyOf(st)] = true
			_ = signalProc(keyOf(st), syscall.SIGKILL)
		}
		if !t.waitGone(live, deadline) {
			break
		}
	}
	return len(killed)
}

// isTrialCgroup reports whether path is a trial cgroup batchfit made: a
// record is only trusted as far as it names one.
func isTrialCgroup(path string) bool {
	return path != "" && filepath.IsAbs(path) && strings.HasPrefix(filepath.Base(path), cgroupPrefix)
}

// recorded finds the live processes of the recorded trial p. The kernel
// keeps a pid allocated while a process group uses it as its id, so a group
// whose leader is gone is still the trial's; one whose leader is alive is
// the trial's only if the leader's start time matches.
func (t *tracker) recorded(p Process) []procfs.Stat {
	all := scanAll()
	leader, leaderAlive := all[p.PID]
	groupOurs := p.PID > 1 && (!leaderAlive || leader.Start == p.Start)
	ours := map[int]bool{}
	var others []int
	for pid, st := range all {
		switch {
		case pid == t.self || st.Dead():
		case groupOurs && st.PGRP == p.PID && st.Start >= p.Start:
			ours[pid] = true
		default:
			others = append(others, pid)
		}
	}
	if p.Cookie != "" {
		for _, pid := range t.withCookie(others) {
			ours[pid] = true
		}
	}
	addDescendants(ours, all, func(pid int) bool { return pid != t.self && !all[pid].Dead() })
	out := make([]procfs.Stat, 0, len(ours))
	for pid := range ours {
		out = append(out, all[pid])
	}
	return out
}
