package trial

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/procgroup"
)

func needSetsid(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid(1) from util-linux is not installed")
	}
}

// TestDetachedDaemonKilled: a daemon that left the process group, the
// process tree and the cookie behind is still the trial's: it is in the
// trial's cgroup. Without cgroup v2 nothing can find it for sure, so the
// test needs one.
func TestDetachedDaemonKilled(t *testing.T) {
	t.Parallel()
	needSetsid(t)
	if !CgroupAvailable() {
		t.Skip("no writable cgroup v2 here: the process-group fallback cannot catch an env -i daemon")
	}
	var spawned Process
	done := false
	res, pidFile := run(t, context.Background(), "detached.sh", "", func(s *Spec) {
		s.OnSpawn = func(p Process) func() {
			spawned = p
			return func() { done = true }
		}
	}, nil)
	if res.ExitCode != 0 || res.Signal != 0 {
		t.Fatalf("result %+v", res)
	}
	pids := readPids(t, pidFile)
	if len(pids) != 1 {
		t.Fatalf("pids %v", pids)
	}
	if res.Orphans != 1 {
		t.Errorf("Orphans = %d, want 1", res.Orphans)
	}
	assertGone(t, pids...)
	if spawned.PID != res.PID || spawned.Cgroup == "" || spawned.Start == 0 || spawned.Cookie == "" {
		t.Errorf("OnSpawn got %+v, leader %d", spawned, res.PID)
	}
	if !done {
		t.Error("the done func of OnSpawn was not called")
	}
	if _, err := os.Stat(spawned.Cgroup); !os.IsNotExist(err) {
		t.Errorf("the trial's cgroup %s is still there: %v", spawned.Cgroup, err)
	}
}

// TestOnSpawnWithoutCgroup: with trial cgroups off, the record names the
// process group and the cookie only.
func TestOnSpawnWithoutCgroup(t *testing.T) {
	// Not parallel: it changes the environment.
	t.Setenv(cgroupEnv, "off")
	var spawned Process
	res, _ := run(t, context.Background(), "env.sh", "", func(s *Spec) {
		s.OnSpawn = func(p Process) func() { spawned = p; return nil }
	}, nil)
	if spawned.PID != res.PID || spawned.Cgroup != "" || spawned.Start == 0 {
		t.Errorf("OnSpawn got %+v, leader %d", spawned, res.PID)
	}
}

// orphanedTrial starts testdata/launcher.sh as a trial whose batchfit died
// would have left it: its own process group and cookie, in a cgroup when
// withCgroup, and then kills its leader (Pdeathsig would have). It returns
// the record and the pids of the launcher's children.
func orphanedTrial(t *testing.T, withCgroup bool, mode string) (Process, []int) {
	t.Helper()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	cookie := newCookie()
	var cg *cgroup
	if withCgroup {
		if cg = newCgroup(cookie); cg == nil {
			t.Skip("no writable cgroup v2 here")
		}
	}
	attr := procgroup.Attr()
	attr.Pdeathsig = 0
	if cg != nil {
		cg.attach(attr)
	}
	cmd := exec.Command("testdata/launcher.sh", pidFile, mode)
	cmd.Env = withCookie(os.Environ(), cookie, "")
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := Process{PID: cmd.Process.Pid, Cookie: cookie}
	if st, err := procfs.ReadStat(p.PID); err == nil {
		p.Start = st.Start
	}
	if cg != nil {
		p.Cgroup = cg.path
		cg.dir.Close()
		t.Cleanup(func() { _ = removeCgroup(p.Cgroup, cleanupBudget) })
	}
	pids := waitPids(t, pidFile, 3)
	t.Cleanup(func() {
		for _, pid := range readPids(t, pidFile) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	cmd.Process.Kill()
	cmd.Wait()
	return p, pids
}

func TestStopLeftTrial(t *testing.T) {
	t.Parallel()
	needSetsid(t)
	cases := []struct {
		name       string
		withCgroup bool
		mode       string
	}{
		{"process group and cookie", false, ""},
		{"cgroup", true, "detached"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, pids := orphanedTrial(t, c.withCgroup, c.mode)
			bystander := exec.Command("sleep", "1000")
			if err := bystander.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })

			if n := Stop(p); n < len(pids) {
				t.Errorf("Stop killed %d processes, want at least %d", n, len(pids))
			}
			assertGone(t, pids...)
			if err := bystander.Process.Signal(syscall.Signal(0)); err != nil {
				t.Errorf("an unrelated process was killed: %v", err)
			}
			if c.withCgroup {
				if _, err := os.Stat(p.Cgroup); !os.IsNotExist(err) {
					t.Errorf("cgroup %s not removed: %v", p.Cgroup, err)
				}
			}
			if n := Stop(p); n != 0 {
				t.Errorf("a second Stop killed %d", n)
			}
		})
	}
}

// TestStopChecksLeaderStart: a record whose leader pid now names another
// process (pid reuse) must not kill that process or its group.
func TestStopChecksLeaderStart(t *testing.T) {
	t.Parallel()
	other := exec.Command("sleep", "1000")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	st, err := procfs.ReadStat(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if n := Stop(Process{PID: st.PID, Start: st.Start + 1}); n != 0 {
		t.Errorf("Stop killed %d processes of another group", n)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process that reused the pid was killed: %v", err)
	}
}
