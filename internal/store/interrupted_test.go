//go:build unix

package store

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/record"
)

// TestSIGKILLMidRun kills a real writer process between (or during) trial
// commits: the database must stay intact, and the run must be listed as
// interrupted with every trial that was committed.
func TestSIGKILLMidRun(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/batchfit.db"
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	next := func() string {
		if !lines.Scan() {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child stopped early: %v", lines.Err())
		}
		return lines.Text()
	}
	id := next()
	committed := 0
	for committed < 3 {
		committed, _ = strconv.Atoi(next())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	integrityOK(t, path)
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.List(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != id {
		t.Fatalf("listed %d runs, want the child's %s", len(runs), id)
	}
	r := runs[0]
	if r.Status != record.Interrupted {
		t.Errorf("status %s, want interrupted", r.Status)
	}
	if !strings.Contains(r.Error, strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("error %q does not name the dead process", r.Error)
	}
	if r.Finished.IsZero() || r.Finished.Before(r.Started) {
		t.Errorf("finished %v, started %v", r.Finished, r.Started)
	}
	if len(r.Trials) < committed {
		t.Fatalf("%d trials stored, but the child had committed %d", len(r.Trials), committed)
	}
	for i, tr := range r.Trials {
		if tr.N != i+1 {
			t.Fatalf("trial %d has N %d: a gap or a half-written trial", i+1, tr.N)
		}
	}
	// The status was rewritten, so plain SQL sees it too.
	var status string
	if err := s.db.QueryRow(`SELECT status FROM runs WHERE id = ?`, id).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != string(record.Interrupted) {
		t.Errorf("stored status %q, want it rewritten to interrupted", status)
	}
}

// TestOwnerGone covers the ways the owner of a running run can be judged.
func TestOwnerGone(t *testing.T) {
	ctx := context.Background()
	dead := exec.Command(os.Args[0], "-test.run=^$")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := dead.Process.Pid
	for _, c := range []struct {
		name   string
		update string
		args   []any
		want   record.Status
	}{
		{"alive", ``, nil, record.Running},
		{"pid gone", `owner_pid = ?`, []any{deadPID}, record.Interrupted},
		{"pid reused", `owner_start = owner_start + 1`, nil, record.Interrupted},
		{"before a reboot", `owner_boot = ?`, []any{"00000000-0000-0000-0000-000000000000"}, record.Interrupted},
		// A pid on another machine means nothing here: no evidence, no verdict.
		{"other host", `owner_host = ?, owner_pid = ?`, []any{"elsewhere", deadPID}, record.Running},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "before a reboot" && self().boot == "" {
				t.Skip("no /proc/sys/kernel/random/boot_id on this system")
			}
			if c.name == "pid reused" && self().start == 0 {
				t.Skip("no /proc/PID/stat on this system")
			}
			s, _ := openTemp(t)
			r := sampleRun()
			if err := s.BeginRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			if c.update != "" {
				args := append(c.args, r.ID)
				if _, err := s.db.Exec(`UPDATE runs SET `+c.update+` WHERE id = ?`, args...); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != c.want {
				t.Errorf("status %s, want %s", got.Status, c.want)
			}
		})
	}
}
