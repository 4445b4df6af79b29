package trial

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupEnv turns trial cgroups off when set to "off", so that tests can
// run the process-group fallback on a machine that has cgroup v2.
const cgroupEnv = "BATCHFIT_CGROUP"

// cgroupPrefix starts the name of every trial cgroup, so that one left by
// a batchfit that was killed is recognisable as batchfit's.
const cgroupPrefix = "batchfit-trial-"

// cgroup is a cgroup v2 directory that holds one trial and nothing else.
// Whatever the trial's processes do (setsid, double forks, an emptied
// environment) they cannot leave it: only a process with write access to
// cgroup.procs elsewhere can move them. Killing the cgroup kills the trial.
type cgroup struct {
	path string
	dir  *os.File // the open directory, for clone3's CLONE_INTO_CGROUP
}

var (
	cgroupBaseOnce sync.Once
	cgroupBase     string // where trial cgroups are made; "" when nowhere
)

// trialCgroupBase is batchfit's own cgroup v2 directory when trial
// cgroups can be made under it; "" when there is no cgroup v2, it is not
// writable (cgroup v1 only, a container without delegation, a systemd
// session scope not delegated to the user), or BATCHFIT_CGROUP=off.
func trialCgroupBase() string {
	if os.Getenv(cgroupEnv) == "off" {
		return ""
	}
	cgroupBaseOnce.Do(func() {
		dir := ownCgroupDir()
		if dir == "" || unix.Access(dir, unix.W_OK) != nil {
			return
		}
		cgroupBase = dir
	})
	return cgroupBase
}

// CgroupAvailable reports whether trials run in cgroups of their own here.
func CgroupAvailable() bool { return trialCgroupBase() != "" }

// ownCgroupDir finds batchfit's cgroup v2 directory from the cgroup2 mount
// in /proc/self/mountinfo and the "0::" line of /proc/self/cgroup; "" if
// either is missing.
func ownCgroupDir() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	var own string
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own, found = p, true
			break
		}
	}
	if !found || !strings.HasPrefix(own, "/") || strings.HasSuffix(own, " (deleted)") {
		return ""
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		fields := strings.Fields(pre)
		if len(fields) < 5 {
			continue
		}
		root, mount := fields[3], fields[4]
		rel, ok := strings.CutPrefix(own, root)
		if root == "/" {
			rel, ok = own, true
		}
		if !ok {
			continue
		}
		return filepath.Join(mount, rel)
	}
	return ""
}

// newCgroup makes the cgroup of the trial with this cookie; nil when trial
// cgroups are not available or this one cannot be made.
func newCgroup(cookie string) *cgroup {
	base := trialCgroupBase()
	if base == "" {
		return nil
	}
	path := filepath.Join(base, cgroupPrefix+cookie)
	if err := os.Mkdir(path, 0o755); err != nil {
		return nil
	}
	dir, err := os.Open(path)
	if err != nil {
		os.Remove(path)
		return nil
	}
	return &cgroup{path: path, dir: dir}
}

// attach sets attr so that the child starts inside the cgroup: clone3
// with CLONE_INTO_CGROUP, so not even its first fork happens outside.
func (c *cgroup) attach(attr *syscall.SysProcAttr) {
	attr.UseCgroupFD = true
	attr.CgroupFD = int(c.dir.Fd())
}

// pids lists the processes in the cgroup of the trial at path.
func cgroupPIDs(path string) []int {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// killCgroup kills (SIGKILL) every process in the cgroup at path: through
// cgroup.kill (Linux 5.14), which the kernel applies to processes forked
// meanwhile too, else pid by pid from cgroup.procs, again until none is
// left or the rounds run out.
func killCgroup(path string) {
	if os.WriteFile(filepath.Join(path, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for range 10 {
		pids := cgroupPIDs(path)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// signalCgroup sends sig to every process in the cgroup at path.
func signalCgroup(path string, sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		killCgroup(path)
		return
	}
	for _, pid := range cgroupPIDs(path) {
		_ = unix.Kill(pid, sig)
	}
}

// populated reports whether a live process is left in the cgroup at path.
func populated(path string) bool {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.events"))
	if err != nil {
		return len(cgroupPIDs(path)) > 0
	}
	return bytes.Contains(b, []byte("populated 1"))
}

// removeCgroup kills what is left in the cgroup at path and removes it,
// waiting up to budget for its processes to die. A cgroup that is already
// gone is no error.
func removeCgroup(path string, budget time.Duration) error {
	deadline := time.Now().Add(budget)
	for {
		err := os.Remove(path)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		if populated(path) {
			killCgroup(path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// close removes the cgroup; the trial's processes must be gone.
func (c *cgroup) close() {
	c.dir.Close()
	_ = removeCgroup(c.path, cleanupBudget)
}
