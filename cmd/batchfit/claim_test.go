package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// barrierEnv names a FIFO that a batchfit started by a test opens before
// it runs: every batchfit waiting on it goes on the moment the test opens
// it for writing, so that they start their work together.
const barrierEnv = "BATCHFIT_TEST_BARRIER"

// awaitBarrier says the process is at the barrier (FIFO.ready.PID), then
// waits there.
func awaitBarrier(fifo string) {
	ready := fmt.Sprintf("%s.ready.%d", fifo, os.Getpid())
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	f, err := os.Open(fifo)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	f.Close()
}

// Two searches started at the same moment on one GPU: one runs, the other
// is refused as a search that starts while another runs there, every time.
func TestTwoSearchesAtOnceOnOneGPU(t *testing.T) {
	const pairs = 20
	dir := t.TempDir()
	env := append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	for i := range pairs {
		fifo := filepath.Join(dir, fmt.Sprintf("barrier-%d", i))
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		type search struct {
			cmd    *exec.Cmd
			stderr bytes.Buffer
			done   chan struct{}
		}
		var s [2]*search
		for j := range s {
			s[j] = &search{done: make(chan struct{})}
			s[j].cmd = exec.Command("batchfit", "demo", "--fresh", "--sim-slow-start", "5s", "--start", "8",
				"--log-dir", filepath.Join(dir, fmt.Sprintf("logs-%d-%d", i, j)))
			s[j].cmd.Env = append(env, barrierEnv+"="+fifo)
			s[j].cmd.Stderr = &s[j].stderr
			if err := s[j].cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { s[j].cmd.Wait(); close(s[j].done) }()
		}
		stop := func() {
			for _, x := range s {
				x.cmd.Process.Signal(os.Interrupt)
				<-x.done
			}
		}
		for _, x := range s {
			ready := fmt.Sprintf("%s.ready.%d", fifo, x.cmd.Process.Pid)
			if err := waitFor(30*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }); err != nil {
				stop()
				t.Fatalf("pair %d: a search did not reach the barrier: %v", i, err)
			}
		}
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			stop()
			t.Fatal(err)
		}
		var refused, running *search
		select {
		case <-s[0].done:
			refused, running = s[0], s[1]
		case <-s[1].done:
			refused, running = s[1], s[0]
		case <-time.After(20 * time.Second):
		}
		w.Close()
		if refused == nil {
			stop()
			t.Fatalf("pair %d: both searches ran\n%s\n%s", i, s[0].stderr.String(), s[1].stderr.String())
		}
		select {
		case <-running.done:
			t.Fatalf("pair %d: both searches ended (exit %d and %d)\n%s\n%s", i,
				refused.cmd.ProcessState.ExitCode(), running.cmd.ProcessState.ExitCode(), refused.stderr.String(), running.stderr.String())
		default:
		}
		want := regexp.MustCompile(`(?m)^batchfit: error: another search is running on the same GPU: run \w+ by batchfit \(pid ` +
			strconv.Itoa(running.cmd.Process.Pid) + `\): batchfit demo$`)
		if code := refused.cmd.ProcessState.ExitCode(); code != exitError || !want.Match(refused.stderr.Bytes()) {
			stop()
			t.Fatalf("pair %d: the refused search exited %d with\n%s\nwant exit %d and a line matching %s", i, code, refused.stderr.String(), exitError, want)
		}
		running.cmd.Process.Signal(os.Interrupt)
		<-running.done
		if code := running.cmd.ProcessState.ExitCode(); code != exitInterrupted {
			t.Fatalf("pair %d: the search that ran exited %d on Ctrl-C, want %d\n%s", i, code, exitInterrupted, running.stderr.String())
		}
	}
}
