package procgroup

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// start runs a real sleep with Attr and returns its pid; the test reaps it.
func start(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = Attr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleep: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func TestAttrLeadsOwnGroup(t *testing.T) {
	cmd := start(t)
	pgid, err := syscall.Getpgid(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("getpgid: %v", err)
	}
	if pgid != cmd.Process.Pid {
		t.Errorf("child's group = %d, want its own pid %d", pgid, cmd.Process.Pid)
	}
}

func TestWaitExitLeavesZombie(t *testing.T) {
	cmd := start(t)
	pid := cmd.Process.Pid
	done := WaitExit(pid)
	select {
	case <-done:
		t.Fatal("WaitExit reported a running process as exited")
	case <-time.After(50 * time.Millisecond):
	}
	if Exited(pid) {
		t.Fatal("Exited reported a running process as exited")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	<-done
	if !Exited(pid) {
		t.Error("Exited = false after the process was killed")
	}
	// Not reaped: the zombie is still there for its owner to collect.
	var ws unix.WaitStatus
	if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != nil || got != pid {
		t.Errorf("wait4 after WaitExit = %d, %v; want the zombie %d still unreaped", got, err, pid)
	}
}

func TestExitedUnknownPID(t *testing.T) {
	// pid_max is at most 2^22 on Linux: this pid cannot exist.
	if !Exited(1 << 23) {
		t.Error("Exited = false for a pid that cannot exist")
	}
}

func TestKillGroup(t *testing.T) {
	// A shell in its own group with a child of its own: both must go.
	cmd := exec.Command("sh", "-c", "sleep 60 & wait")
	cmd.SysProcAttr = Attr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sh: %v", err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = unix.Kill(-pgid, unix.SIGKILL)
		_ = cmd.Wait()
	})
	if err := KillGroup(pgid, syscall.SIGKILL); err != nil {
		t.Fatalf("KillGroup: %v", err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("sh ended with %v, want SIGKILL", err)
	}
	// The sleep may be reparented before it dies; it is gone when the
	// group is empty.
	deadline := time.Now().Add(5 * time.Second)
	for unix.Kill(-pgid, 0) != unix.ESRCH {
		if time.Now().After(deadline) {
			t.Fatal("the group still has a member after KillGroup")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := KillGroup(pgid, syscall.SIGKILL); err != unix.ESRCH {
		t.Errorf("KillGroup of an empty group = %v, want ESRCH", err)
	}
}

func TestKillGroupRefusesSpecialIDs(t *testing.T) {
	// Unrefused, these would reach every process the test may signal, its
	// own group, or one process; SIGCONT does no harm all the same.
	for _, pgid := range []int{-1, 0, 1} {
		if err := KillGroup(pgid, syscall.SIGCONT); err == nil {
			t.Errorf("KillGroup(%d) succeeded, want it refused", pgid)
		}
	}
}
