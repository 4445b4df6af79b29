package gpu

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/procfs"
)

// startTree runs sh with script; the script prints the PIDs it wants the
// test to know, one a line. The whole tree is killed when the test ends.
func startTree(t *testing.T, ownGroup bool, script string, npids int) (sh int, pids []int) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("process trees are read from /proc, linux only")
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: ownGroup}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ownGroup {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for range npids {
		if !sc.Scan() {
			t.Fatalf("sh printed %d of %d pids: %v", len(pids), npids, sc.Err())
		}
		pid, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("sh printed %q, not a pid", sc.Text())
		}
		pids = append(pids, pid)
	}
	return cmd.Process.Pid, pids
}

// memoryFor is a one-GPU backend that reports size bytes for each of pids
// and for nothing else.
func memoryFor(size uint64, pids ...int) *fakeBackend {
	m := make(map[int]uint64)
	for _, pid := range pids {
		m[pid] = size
	}
	return &fakeBackend{
		DevicesFunc:       devices(1),
		ProcessMemoryFunc: func(int) (map[int]uint64, error) { return m, nil },
		UsedMemoryFunc:    func(int) (uint64, error) { return 0, nil },
	}
}

// A real tree: sh and its two background children. The test process, sh's
// parent, also "uses" the GPU and must not be counted.
func TestSamplerRealTree(t *testing.T) {
	sh, kids := startTree(t, false, `sleep 30 & echo $!; sleep 30 & echo $!; wait`, 2)
	const mb = 1 << 20
	b := memoryFor(mb, append([]int{sh, os.Getpid()}, kids...)...)
	got := NewSampler(b, 0).Start(sh, nil).Stop()
	if got.Method != MethodProcess || got.Bytes != 3*mb {
		t.Errorf("peak = %+v, want 3 MiB (sh and two children) by process", got)
	}
}

// A real orphan: a subshell starts sleep and exits, so sleep is re-parented
// out of the tree; it stays in sh's process group and must still count.
func TestSamplerRealProcessGroup(t *testing.T) {
	sh, pids := startTree(t, true, `(sleep 30 & echo $!); sleep 30`, 1)
	orphan := pids[0]
	waitReparented(t, orphan, sh)
	const mb = 1 << 20
	b := memoryFor(mb, sh, orphan, os.Getpid())
	got := NewSampler(b, 0).Start(sh, nil).Stop()
	if got.Method != MethodProcess || got.Bytes != 2*mb {
		t.Errorf("peak = %+v, want 2 MiB (sh and the orphan in its group) by process", got)
	}
}

// waitReparented waits until pid's parent is no longer the subshell, i.e.
// neither sh nor a child of sh.
func waitReparented(t *testing.T, pid, sh int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p, err := procfs.ReadStat(pid)
		if err != nil {
			t.Fatal(err)
		}
		if p.PGRP != sh {
			t.Fatalf("pid %d is in group %d, want %d", pid, p.PGRP, sh)
		}
		if parent, err := procfs.ReadStat(p.PPID); p.PPID != sh && (err != nil || parent.PPID != sh) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("pid %d was not re-parented", pid)
}
