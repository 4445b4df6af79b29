package slurmtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A cluster runs jobs, offers its fake GPUs, and leaves nothing behind: no
// daemon, no job's process, no directory.
func TestStartRunsJobsAndStopLeavesNothing(t *testing.T) {
	c := Start(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "hello.out")
	if _, err := c.Run(ctx, "sbatch", "--parsable", "--gres=gpu:2", "--output="+out, "--wrap", "echo hello $CUDA_VISIBLE_DEVICES"); err != nil {
		t.Fatal(err)
	}
	// A job still running at Stop must be cancelled, its process ended.
	const marker = "600.5"
	if _, err := c.Run(ctx, "sbatch", "--parsable", "--output=/dev/null", "--wrap", "sleep "+marker); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(20*time.Second, func() bool {
		b, _ := os.ReadFile(out)
		return strings.HasPrefix(string(b), "hello ")
	}); err != nil {
		b, _ := os.ReadFile(out)
		t.Fatalf("the job's output is %q: %v", b, err)
	}
	if b, _ := os.ReadFile(out); len(strings.Split(strings.Fields(string(b))[1], ",")) != 2 {
		t.Errorf("output %q: want two GPUs in CUDA_VISIBLE_DEVICES", b)
	}
	if err := waitFor(20*time.Second, func() bool { return processWith(marker) }); err != nil {
		t.Fatalf("the sleeping job never ran: %v", err)
	}

	var pids []int
	for _, d := range c.daemons {
		pids = append(pids, d.cmd.Process.Pid)
	}
	if len(pids) != 3 {
		t.Fatalf("%d daemons, want munged, slurmctld, slurmd", len(pids))
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("daemon %d is still there after Stop (%v)", pid, err)
		}
	}
	if processWith(marker) {
		t.Error("the running job's process outlived the cluster")
	}
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cluster's directory is still there: %v", err)
	}
}

// processWith reports whether a process's command line holds arg.
func processWith(arg string) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				return true
			}
		}
	}
	return false
}
