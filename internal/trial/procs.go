package trial

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procStat is what the tracker needs from /proc/<pid>/stat. A pid alone can
// be reused once its process is reaped; pid and start time together name
// one process.
type procStat struct {
	pid, ppid, pgid int
	state           byte   // R, S, D, Z (zombie), X (dead), ...
	start           uint64 // clock ticks after boot
}

type procKey struct {
	pid   int
	start uint64
}

func (p procStat) key() procKey { return procKey{p.pid, p.start} }

func (p procStat) dead() bool { return p.state == 'Z' || p.state == 'X' }

// parseStat parses /proc/<pid>/stat. The command name is in parentheses and
// may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func parseStat(b []byte) (procStat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return procStat{}, errors.New("malformed stat")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return procStat{}, fmt.Errorf("malformed stat: %w", err)
	}
	f := bytes.Fields(b[end+1:])
	// f[0] is field 3 of proc(5) (state); starttime is field 22.
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, errors.New("malformed stat: too few fields")
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("malformed stat: %w", err)
	}
	return procStat{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0], start: start}, nil
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// pids lists every process on the machine.
func pids() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// scanAll reads the stat of every process.
func scanAll() map[int]procStat {
	all := map[int]procStat{}
	for _, pid := range pids() {
		if st, err := readStat(pid); err == nil {
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
	var kids func(pid int) []procStat
	if haveChildrenFiles() {
		kids = func(pid int) []procStat {
			var out []procStat
			for _, c := range childrenOf(pid) {
				// The child may have exited and its pid been reused
				// between the two reads.
				if st, err := readStat(c); err == nil && st.ppid == pid {
					out = append(out, st)
				}
			}
			return out
		}
	} else {
		byParent := map[int][]procStat{}
		for _, st := range scanAll() {
			byParent[st.ppid] = append(byParent[st.ppid], st)
		}
		kids = func(pid int) []procStat { return byParent[pid] }
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	queue := []int{t.leader}
	for pid, start := range t.known {
		// A known pid is walked only while it names the same process; one
		// that is gone is forgotten (a zombie is not gone yet).
		if st, err := readStat(pid); err == nil && st.start == start {
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
			if c.pid == t.leader || c.pid == t.self {
				continue
			}
			t.known[c.pid] = c.start
			queue = append(queue, c.pid)
		}
	}
}

// signalAll sends sig to the trial's process group and to every known
// descendant, wherever it went.
func (t *tracker) signalAll(sig syscall.Signal) {
	// The group id is the leader's pid; the leader is not reaped before the
	// trial's cleanup is done, so the id still names this trial's group.
	_ = unix.Kill(-t.leader, sig)
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
func (t *tracker) leftovers() []procStat {
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
		case st.pgid == t.leader || (isKnown && start == st.start):
			ours[pid] = true
		case !st.dead():
			others = append(others, pid)
		}
	}
	for _, pid := range t.withCookie(others) {
		ours[pid] = true
	}
	// Descendants of anything ours are ours: a child forked after the last
	// walk by a process that changed its environment.
	byParent := map[int][]int{}
	for pid, st := range all {
		byParent[st.ppid] = append(byParent[st.ppid], pid)
	}
	queue := make([]int, 0, len(ours))
	for pid := range ours {
		queue = append(queue, pid)
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, c := range byParent[pid] {
			if !ours[c] && c != t.self {
				ours[c] = true
				queue = append(queue, c)
			}
		}
	}
	delete(ours, t.leader)
	out := make([]procStat, 0, len(ours))
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
		var live []procStat
		for _, p := range procs {
			if p.dead() {
				t.reap(p)
				continue
			}
			live = append(live, p)
			killed[p.key()] = true
		}
		_ = unix.Kill(-t.leader, syscall.SIGKILL)
		if len(live) == 0 {
			break
		}
		for _, p := range live {
			_ = signalProc(p.key(), syscall.SIGKILL)
		}
		if !t.waitGone(live, deadline) {
			break
		}
	}
	return len(killed)
}

// waitGone waits until every process in procs has exited, reaping the ones
// that are batchfit's children now. It reports false at the deadline.
func (t *tracker) waitGone(procs []procStat, deadline time.Time) bool {
	for {
		left := 0
		for _, p := range procs {
			cur, err := readStat(p.pid)
			if err != nil || cur.start != p.start {
				continue
			}
			if cur.dead() {
				if cur.ppid != t.self || t.reap(cur) {
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
func (t *tracker) reap(p procStat) bool {
	cur, err := readStat(p.pid)
	if err != nil || cur.start != p.start || cur.ppid != t.self || !cur.dead() || p.pid == t.leader {
		return false
	}
	var ws unix.WaitStatus
	wpid, err := unix.Wait4(p.pid, &ws, unix.WNOHANG, nil)
	return err == nil && wpid == p.pid
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
	if st, err := readStat(k.pid); err != nil || st.start != k.start {
		return nil
	}
	if err == nil {
		if err := unix.PidfdSendSignal(fd, sig, nil, 0); err == nil || err == unix.ESRCH {
			return nil
		}
	}
	return unix.Kill(k.pid, sig)
}
