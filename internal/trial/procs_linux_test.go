package trial

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/procgroup"
)

// TestTrackerFindsDescendants checks the tree walk on a real tree, whichever
// way this kernel supports (children files or a scan of /proc), and the
// cleanup that Run does after the leader exits.
func TestTrackerFindsDescendants(t *testing.T) {
	procgroup.BecomeSubreaper()
	cmd := exec.Command("sh", "-c", "sleep 1000 & sleep 1000 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	leader := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-leader, syscall.SIGKILL); cmd.Wait() })
	tr := newTracker(leader, "test")
	// A deadline, not a count of polls: a poll takes microseconds, and a
	// loaded machine may take longer than a thousand of them to fork.
	for deadline := time.Now().Add(10 * time.Second); len(tr.known) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("known descendants %v, want the two sleeps", tr.known)
		}
		tr.poll()
		time.Sleep(time.Millisecond)
	}
	for pid, start := range tr.known {
		st, err := procfs.ReadStat(pid)
		if err != nil || st.PPID != leader || st.Start != start {
			t.Errorf("descendant %d: %+v, %v", pid, st, err)
		}
	}

	var pids []int
	for pid := range tr.known {
		pids = append(pids, pid)
	}

	// As in Run: the leader dies first and stays unreaped during cleanup.
	exited := procgroup.WaitExit(leader)
	cmd.Process.Kill()
	<-exited
	if n := tr.killLeftovers(); n != 2 {
		t.Errorf("killLeftovers = %d, want 2", n)
	}
	cmd.Wait()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("descendant %d still there (a zombie not reaped?)", pid)
		}
	}
}

func TestSignalProcChecksStartTime(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	st, err := procfs.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// The same pid with another start time is another process: untouched.
	if err := signalProc(procKey{st.PID, st.Start + 1}, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if cur, err := procfs.ReadStat(st.PID); err != nil || cur.Dead() {
		t.Fatalf("a process with another start time was killed: %+v %v", cur, err)
	}
	if err := signalProc(keyOf(st), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("sleep ended with %v, want SIGKILL", ws)
	}
}
