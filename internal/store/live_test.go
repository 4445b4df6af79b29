package store

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/record"
)

func TestLeftTrials(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	p := TrialProcess{PID: 4242, PGID: 4242, Start: 99, Cgroup: "/sys/fs/cgroup/batchfit-trial-x", Cookie: "c"}
	ids := map[string]int64{}
	for _, name := range []string{"alive", "dead", "rebooted", "elsewhere", "ended"} {
		id, err := s.TrialStarted(ctx, "run-"+name, p)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	// This process owns every record; make some owners look otherwise.
	db := s.db
	for _, q := range []struct {
		sql  string
		name string
	}{
		// The pid is alive but started at another time: a reused pid.
		{`UPDATE live_trials SET owner_start = owner_start + 1 WHERE id = ?`, "dead"},
		{`UPDATE live_trials SET owner_boot = 'another-boot' WHERE id = ?`, "rebooted"},
		{`UPDATE live_trials SET owner_host = 'another-host', owner_start = 1 WHERE id = ?`, "elsewhere"},
	} {
		if _, err := db.ExecContext(ctx, q.sql, ids[q.name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ClearTrial(ctx, ids["ended"]); err != nil {
		t.Fatal(err)
	}

	left, err := s.LeftTrials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 {
		t.Fatalf("left %+v, want only the dead owner's", left)
	}
	got := left[0]
	if got.ID != ids["dead"] || got.RunID != "run-dead" || got.TrialProcess != p || got.OwnerPID != s.me.pid {
		t.Errorf("left %+v", got)
	}

	// The record of an earlier boot is gone; the others stay.
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM live_trials`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d records left, want 3 (alive, dead, elsewhere)", n)
	}
	if err := s.ClearTrial(ctx, got.ID); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A fresh open of the file sees the same.
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if left, err := s2.LeftTrials(ctx); err != nil || len(left) != 0 {
		t.Errorf("after clearing: %+v, %v", left, err)
	}
}

func TestNullRecordsNoTrial(t *testing.T) {
	id, err := Null{}.TrialStarted(context.Background(), "", TrialProcess{PID: 1})
	if id != 0 || err != nil {
		t.Errorf("Null.TrialStarted = %d, %v", id, err)
	}
}

func TestLiveOn(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	defer s.Close()
	// Another batchfit, alive: a sleep stands in for it.
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	st, err := procfs.ReadStat(other.Process.Pid)
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	h100 := gpu.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H100"}
	a100 := gpu.Device{Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA A100"}
	noUUID := gpu.Device{Index: 2, Name: "Old GPU"}
	ids := map[string]string{}
	for _, c := range []struct {
		name string
		dev  gpu.Device
		sql  string
	}{
		{"live", h100, `UPDATE runs SET owner_pid = ?, owner_start = ? WHERE id = ?`},
		{"other gpu", a100, `UPDATE runs SET owner_pid = ?, owner_start = ? WHERE id = ?`},
		{"by index and name", noUUID, `UPDATE runs SET owner_pid = ?, owner_start = ? WHERE id = ?`},
		{"dead owner", h100, `UPDATE runs SET owner_pid = ?, owner_start = ? + 1 WHERE id = ?`},
		{"other host", h100, `UPDATE runs SET owner_pid = ?, owner_start = ?, owner_host = 'elsewhere' WHERE id = ?`},
		{"finished", h100, `UPDATE runs SET owner_pid = ?, owner_start = ?, status = 'found' WHERE id = ?`},
		{"mine", h100, ``},
	} {
		run := &record.Run{Status: record.Running, Started: time.Now(), Command: []string{"train", c.name},
			GPU: &record.GPUInfo{Devices: []gpu.Device{c.dev}}}
		if err := s.BeginRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		ids[c.name] = run.ID
		if c.sql != "" {
			if _, err := s.db.ExecContext(ctx, c.sql, other.Process.Pid, int64(st.Start), run.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	live, err := s.LiveOn(ctx, []gpu.Device{h100, {Index: 2, Name: "Old GPU"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range live {
		got = append(got, l.Run.ID)
		if l.OwnerPID != other.Process.Pid {
			t.Errorf("run %s owner %d, want %d", l.Run.ID, l.OwnerPID, other.Process.Pid)
		}
	}
	if want := []string{ids["live"], ids["by index and name"]}; !slices.Equal(got, want) {
		t.Errorf("live runs %v, want %v (live, by index and name)", got, want)
	}
	if live, err := (Null{}).LiveOn(ctx, []gpu.Device{h100}); live != nil || err != nil {
		t.Errorf("Null.LiveOn = %v, %v", live, err)
	}
}
