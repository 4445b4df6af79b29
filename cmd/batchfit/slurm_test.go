package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/slurm/slurmtest"
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
