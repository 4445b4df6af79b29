package trial

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/batchfit/batchfit/internal/procgroup"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		line string
		want procStat
		ok   bool
	}{
		{"plain", "4078 (python3) S 4021 4021 4021 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 0 0", procStat{4078, 4021, 4021, 'S', 123456}, true},
		{"name with spaces and parens", "77 (a) b (c)) Z 1 70 70 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0", procStat{77, 1, 70, 'Z', 99}, true},
		{"truncated", "77 (sleep) S 1 70", procStat{}, false},
		{"no name", "garbage", procStat{}, false},
		{"bad number", "77 (sleep) S x 70 70 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0", procStat{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.line))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("parseStat = %+v, %v; want %+v (ok %v)", got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestReadStatOfARealProcess(t *testing.T) {
	st, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.pid != os.Getpid() || st.ppid != os.Getppid() || st.start == 0 || st.dead() {
		t.Fatalf("readStat(self) = %+v", st)
	}
}

// TestTrackerFindsDescendants checks the tree walk on a real tree, whichever
// way this kernel supports (children files or a scan of /proc), and the
// cleanup that Run does after the leader exits.
func TestTrackerFindsDescendants(t *testing.T) {
	becomeSubreaper()
	cmd := exec.Command("sh", "-c", "sleep 1000 & sleep 1000 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	leader := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-leader, syscall.SIGKILL); cmd.Wait() })
	tr := newTracker(leader, "test")
	for i := 0; len(tr.known) < 2; i++ {
		if i == 1000 {
			t.Fatalf("known descendants %v, want the two sleeps", tr.known)
		}
		tr.poll()
	}
	for pid, start := range tr.known {
		st, err := readStat(pid)
		if err != nil || st.ppid != leader || st.start != start {
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
	st, err := readStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// The same pid with another start time is another process: untouched.
	if err := signalProc(procKey{st.pid, st.start + 1}, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if cur, err := readStat(st.pid); err != nil || cur.dead() {
		t.Fatalf("a process with another start time was killed: %+v %v", cur, err)
	}
	if err := signalProc(st.key(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("sleep ended with %v, want SIGKILL", ws)
	}
}
