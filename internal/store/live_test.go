package store

import (
	"context"
	"testing"
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
