package trial

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/procgroup"
)

// procKey names one process. A pid alone can be reused once its process is
// reaped; pid and start time together name one process.
type procKey struct {
	pid   int
	start uint64
}

func keyOf(st procfs.Stat) procKey { return procKey{st.PID, st.Start} }

// scanAll reads the stat of every process.
func scanAll() map[int]procfs.Stat {
	all := map[int]procfs.Stat{}
	pids, _ := procfs.PIDs()
	for _, pid := range pids {
		if st, err := procfs.ReadStat(pid); err == nil {
			all[pid] = st
		}
	}
	return all
}

var (
	childrenOnce sync.Once
	childrenOK   bool
)

// haveChildrenFiles reports whether the kernel has /proc/<pid>/task/<tid>/
// children (CONFIG_PROC_CHILDREN). With it, a walk touches only the trial's
// own processes; without it, every walk reads the stat of every process.
func haveChildrenFiles() bool {
	childrenOnce.Do(func() {
		self := os.Getpid()
		_, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d/children", self, self))
		childrenOK = err == nil
	})
	return childrenOK
}

// childrenOf lists the children of pid from its threads' children files.
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, tid := range tids {
		b, err := os.ReadFile(dir + "/" + tid + "/children")
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// tracker follows the processes of one trial: every descendant of the
// leader it has ever seen, remembered by pid and start time so that one
// which escaped the process group, or was reparented to batchfit, can
// still be killed, and a reused pid is never mistaken for it.
type tracker struct {
	self   int
	leader int
	cgroup string // the trial's cgroup directory; "" when it has none
	cookie []byte // "BATCHFIT_TRIAL_COOKIE=<value>" as in /proc/<pid>/environ

	mu    sync.Mutex
	known map[int]uint64 // pid → start time; the leader is not in it
}

func newTracker(leader int, cookie string) *tracker {
	return &tracker{
		self:   os.Getpid(),
		leader: leader,
		cookie: []byte(cookieEnv + "=" + cookie),
		known:  map[int]uint64{},
	}
}

// poll walks the tree from the leader and from every known descendant that
// is still the same process, and remembers what it finds.
func (t *tracker) poll() {
	var kids func(pid int) []procfs.Stat
	if haveChildrenFiles() {
		kids = func(pid int) []procfs.Stat {
			var out []procfs.Stat
			for _, c := range childrenOf(pid) {
				// The child may have exited and its pid been reused
				// between the two reads.
				if st, err := procfs.ReadStat(c); err == nil && st.PPID == pid {
					out = append(out, st)
				}
			}
			return out
		}
	} else {
		byParent := map[int][]procfs.Stat{}
		for _, st := range scanAll() {
			byParent[st.PPID] = append(byParent[st.PPID], st)
		}
		kids = func(pid int) []procfs.Stat { return byParent[pid] }
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	queue := []int{t.leader}
	for pid, start := range t.known {
		// A known pid is walked only while it names the same process; one
		// that is gone is forgotten (a zombie is not gone yet).
		if st, err := procfs.ReadStat(pid); err == nil && st.Start == start {
			queue = append(queue, pid)
		} else {
			delete(t.known, pid)
		}
	}
	seen := map[int]bool{}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		for _, c := range kids(pid) {
			if c.PID == t.leader || c.PID == t.self {
				continue
			}
			t.known[c.PID] = c.Start
			queue = append(queue, c.PID)
		}
	}
}

// signalAll sends sig to the trial's process group and to every known
// descendant, wherever it went.
func (t *tracker) signalAll(sig syscall.Signal) {
	// The group id is the leader's pid; the leader is not reaped before the
	// trial's cleanup is done, so the id still names this trial's group.
	_ = procgroup.KillGroup(t.leader, sig)
	if t.cgroup != "" {
		signalCgroup(t.cgroup, sig)
	}
	t.mu.Lock()
	known := make([]procKey, 0, len(t.known))
	for pid, start := range t.known {
		known = append(known, procKey{pid, start})
	}
	t.mu.Unlock()
	for _, k := range known {
		_ = signalProc(k, sig)
	}
}

// leftovers finds every process of the trial other than the leader: in its
// process group, a known descendant, a descendant of one of those, or
// carrying the trial's cookie in its environment.
func (t *tracker) leftovers() []procfs.Stat {
	t.poll()
	all := scanAll()
	t.mu.Lock()
	known := make(map[int]uint64, len(t.known))
	for pid, start := range t.known {
		known[pid] = start
	}
	t.mu.Unlock()

	ours := map[int]bool{t.leader: true}
	var others []int
	for pid, st := range all {
		if pid == t.self || pid == t.leader {
			continue
		}
		start, isKnown := known[pid]
		switch {
		case st.PGRP == t.leader || (isKnown && start == st.Start):
			ours[pid] = true
		case !st.Dead():
			others = append(others, pid)
		}
	}
	for _, pid := range t.withCookie(others) {
		ours[pid] = true
	}
	if t.cgroup != "" {
		for _, pid := range cgroupPIDs(t.cgroup) {
			if _, ok := all[pid]; ok && pid != t.self {
				ours[pid] = true
			}
		}
	}
	// Descendants of anything ours are ours: a child forked after the last
	// walk by a process that changed its environment.
	addDescendants(ours, all, func(pid int) bool { return pid != t.self })
	delete(ours, t.leader)
	out := make([]procfs.Stat, 0, len(ours))
	for pid := range ours {
		out = append(out, all[pid])
	}
	return out
}

// cookieScanBudget bounds the environment scan. Reading another process's
// environment takes its memory-map lock, and a process stuck in the kernel
// (a hung GPU driver call, a dead NFS mount) can hold that lock forever; a
// read stuck on it is abandoned rather than hanging batchfit.
const cookieScanBudget = 2 * time.Second

// withCookie returns the pids among pids whose environment holds the
// trial's cookie.
func (t *tracker) withCookie(pids []int) []int {
	found := make(chan int, len(pids))
	go func() {
		defer close(found)
		for _, pid := range pids {
			if t.hasCookie(pid) {
				found <- pid
			}
		}
	}()
	timer := time.NewTimer(cookieScanBudget)
	defer timer.Stop()
	var out []int
	for {
		select {
		case pid, ok := <-found:
			if !ok {
				return out
			}
			out = append(out, pid)
		case <-timer.C:
			return out
		}
	}
}

func (t *tracker) hasCookie(pid int) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, t.cookie) {
			return true
		}
	}
	return false
}

// cleanupBudget bounds how long killLeftovers waits for killed processes to
// die. A process in the GPU driver can take seconds to go.
const cleanupBudget = 15 * time.Second

// killLeftovers kills (SIGKILL) every process of the trial that is still
// alive after its leader exited, reaps those that were reparented to
// batchfit, and returns how many it killed. It rescans after each round: a
// process may fork between the scan and the kill.
func (t *tracker) killLeftovers() int {
	killed := map[procKey]bool{}
	deadline := time.Now().Add(cleanupBudget)
	for round := 0; round < 5; round++ {
		procs := t.leftovers()
		var live []procfs.Stat
		for _, p := range procs {
			if p.Dead() {
				t.reap(p)
				continue
			}
			live = append(live, p)
			killed[keyOf(p)] = true
		}
		_ = procgroup.KillGroup(t.leader, syscall.SIGKILL)
		if t.cgroup != "" {
			killCgroup(t.cgroup)
		}
		if len(live) == 0 {
			break
		}
		for _, p := range live {
			_ = signalProc(keyOf(p), syscall.SIGKILL)
		}
		if !t.waitGone(live, deadline) {
			break
		}
	}
	return len(killed)
}

// waitGone waits until every process in procs has exited, reaping the ones
// that are batchfit's children now. It reports false at the deadline.
func (t *tracker) waitGone(procs []procfs.Stat, deadline time.Time) bool {
	for {
		left := 0
		for _, p := range procs {
			cur, err := procfs.ReadStat(p.PID)
			if err != nil || cur.Start != p.Start {
				continue
			}
			if cur.Dead() {
				if cur.PPID != t.self || t.reap(cur) {
					continue
				}
			}
			left++
		}
		if left == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reap collects p's exit status if p is a zombie child of batchfit: an
// orphan of the trial that was reparented here. Start time and parent are
// checked first, so no other goroutine's child is ever reaped.
func (t *tracker) reap(p procfs.Stat) bool {
	cur, err := procfs.ReadStat(p.PID)
	if err != nil || cur.Start != p.Start || cur.PPID != t.self || !cur.Dead() || p.PID == t.leader {
		return false
	}
	var ws unix.WaitStatus
	wpid, err := unix.Wait4(p.PID, &ws, unix.WNOHANG, nil)
	return err == nil && wpid == p.PID
}

// signalProc sends sig to the process k names, if it is still that process.
// With a pidfd the check and the signal cannot race with pid reuse; without
// one (old kernels, sandboxes) a plain kill follows the check.
func signalProc(k procKey, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(k.pid, 0)
	if err == unix.ESRCH {
		return nil
	}
	if err == nil {
		defer unix.Close(fd)
	}
	if st, err := procfs.ReadStat(k.pid); err != nil || st.Start != k.start {
		return nil
	}
	if err == nil {
		if err := unix.PidfdSendSignal(fd, sig, nil, 0); err == nil || err == unix.ESRCH {
			return nil
		}
	}
	return unix.Kill(k.pid, sig)
}

// addDescendants adds to ours every descendant of a process in it, as all
// (a /proc scan) links them, that keep accepts.
func addDescendants(ours map[int]bool, all map[int]procfs.Stat, keep func(pid int) bool) {
	byParent := map[int][]int{}
	for pid, st := range all {
		byParent[st.PPID] = append(byParent[st.PPID], pid)
	}
	queue := make([]int, 0, len(ours))
	for pid := range ours {
		queue = append(queue, pid)
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, c := range byParent[pid] {
			if !ours[c] && keep(c) {
				ours[c] = true
				queue = append(queue, c)
			}
		}
	}
}
