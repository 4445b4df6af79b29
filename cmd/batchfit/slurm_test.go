package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/testutil/slurmtest"
)

// The demo's search run as Slurm jobs on a real one-node cluster that the
// test starts: two jobs at a time, ten and more trials, and the same answer
// as the local executor.
func TestSearchThroughSlurm(t *testing.T) {
	cluster := slurmtest.Start(t)
	t.Setenv("SLURM_CONF", cluster.Conf)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())

	demo := func(extra ...string) record.Run {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args := append([]string{"demo", "--no-db", "--json", "--strategy", "bisect", "--log-dir", t.TempDir()}, extra...)
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("batchfit %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
		}
		doc, err := parseDocument(stdout.Bytes())
		if err != nil || len(doc.Runs) != 1 {
			t.Fatalf("batchfit %s: stdout: %v", strings.Join(args, " "), err)
		}
		return *doc.Runs[0]
	}
	local := demo()
	viaSlurm := demo("--executor", "slurm", "--jobs", "2", "--partition", "debug", "--sim-gpus", strconv.Itoa(slurmtest.GPUs))
	if viaSlurm.Answer != local.Answer || viaSlurm.Status != record.Found {
		t.Errorf("through Slurm: %s %d; locally: %d", viaSlurm.Status, viaSlurm.Answer, local.Answer)
	}
	if len(viaSlurm.Trials) < 10 {
		t.Errorf("only %d trials through Slurm; the test wants a search of 10 or more", len(viaSlurm.Trials))
	}
	// One search per GPU type, through --constraint, and a table of answers.
	var stdout, stderr bytes.Buffer
	args := []string{"demo", "--no-db", "--strategy", "bisect", "--executor", "slurm", "--jobs", "4", "--sim-gpus", strconv.Itoa(slurmtest.GPUs),
		"--per-gpu-model", "--constraint", strings.Join(slurmtest.Features, ","), "--log-dir", t.TempDir()}
	if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("per GPU type: exit %d\n%s", code, stderr.String())
	}
	for _, f := range slurmtest.Features {
		if !strings.Contains(stdout.String(), f) {
			t.Errorf("the table lacks %s:\n%s", f, stdout.String())
		}
	}
	if n := strings.Count(stdout.String(), " 952 "); n != len(slurmtest.Features) {
		t.Errorf("the table has %d answers of 952, want %d:\n%s", n, len(slurmtest.Features), stdout.String())
	}
	if jobs, err := cluster.Jobs(context.Background()); err != nil || len(jobs) != 0 {
		t.Errorf("jobs left in the queue: %v, %v", jobs, err)
	}
	t.Logf("local: %d in %d trials; Slurm: %d in %d trials, %d rounds, %.1fs", local.Answer, len(local.Trials), viaSlurm.Answer, len(viaSlurm.Trials), viaSlurm.Rounds, viaSlurm.Seconds)
}

// A search killed with SIGKILL while its trial runs as a Slurm job leaves
// the job running; the next batchfit, and not one while the search lives,
// cancels it and says so.
func TestKilledSearchLeavesNoSlurmJob(t *testing.T) {
	cluster := slurmtest.Start(t)
	t.Setenv("SLURM_CONF", cluster.Conf)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	db := filepath.Join(dir, "batchfit.db")
	slow := filepath.Join(dir, "slow.sh")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\ntouch \"$MARKER\"\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "running")
	bf := exec.Command("batchfit", "search", "--executor", "slurm", "--db", db, "--log-dir", filepath.Join(dir, "logs"), "--", slow, "{}")
	bf.Dir = dir
	bf.Env = append(os.Environ(), "MARKER="+marker)
	var bfErr bytes.Buffer
	bf.Stderr = &bfErr
	if err := bf.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			bf.Process.Kill()
			bf.Wait()
		}
	}()
	if err := waitFor(time.Minute, func() bool { _, err := os.Stat(marker); return err == nil }); err != nil {
		t.Fatalf("the trial job did not start: %v\n%s", err, bfErr.String())
	}
	jobs, err := cluster.Jobs(context.Background())
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs %v, %v; want the trial's", jobs, err)
	}
	job := jobs[0]

	history := func() string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"history", "--db", db}, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("batchfit history: exit %d\n%s", code, stderr.String())
		}
		return stderr.String()
	}
	if out := history(); strings.Contains(out, "cancelled") {
		t.Fatalf("history cancelled a live search's job:\n%s", out)
	}
	if st := queueState(t, cluster, job); st != "RUNNING" {
		t.Fatalf("job %s is %q while its search runs, want RUNNING", job, st)
	}

	killed = true
	bf.Process.Kill()
	bf.Wait()
	if st := queueState(t, cluster, job); st != "RUNNING" {
		t.Fatalf("job %s is %q after batchfit was killed, want RUNNING (the test shows nothing)", job, st)
	}
	out := history()
	want := regexp.MustCompile(fmt.Sprintf(`(?m)^batchfit: cancelled Slurm job %s left by run \w+ \(pid %d, killed\)$`, job, bf.Process.Pid))
	if !want.MatchString(out) {
		t.Errorf("history said\n%s\nwant a line matching %s", out, want)
	}
	if st := queueState(t, cluster, job); st != "" {
		t.Errorf("job %s is still in the queue (%s)", job, st)
	}
	if out := history(); strings.Contains(out, "cancelled") {
		t.Errorf("a second history cancelled again:\n%s", out)
	}
}

// queueState is the job's state as squeue lists it; "" when it has left
// the queue.
func queueState(t *testing.T, c *slurmtest.Cluster, id string) string {
	t.Helper()
	out, err := c.Run(context.Background(), "squeue", "-h", "-j", id, "-o", "%T")
	if err != nil && !strings.Contains(err.Error(), "Invalid job id") {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// waitFor polls ok until it holds or the time is up.
func waitFor(limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
