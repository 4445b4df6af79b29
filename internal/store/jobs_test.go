package store

import (
	"context"
	"slices"
	"testing"
)

func TestLeftJobs(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	ids := map[string]int64{}
	for _, name := range []string{"alive", "dead", "dead before the id", "rebooted", "elsewhere", "ended"} {
		id, err := s.JobSubmitting(ctx, "run-"+name, "batchfit-"+name)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
		if name != "dead before the id" {
			if err := s.JobSubmitted(ctx, id, "10"+name); err != nil {
				t.Fatal(err)
			}
		}
	}
	// This process owns every record; make some owners look otherwise.
	for _, q := range []struct {
		sql  string
		name string
	}{
		// The pid is alive but started at another time: a reused pid.
		{`UPDATE live_jobs SET owner_start = owner_start + 1 WHERE id = ?`, "dead"},
		{`UPDATE live_jobs SET owner_start = owner_start + 1 WHERE id = ?`, "dead before the id"},
		{`UPDATE live_jobs SET owner_boot = 'another-boot' WHERE id = ?`, "rebooted"},
		{`UPDATE live_jobs SET owner_host = 'another-host', owner_start = 1 WHERE id = ?`, "elsewhere"},
	} {
		if _, err := s.db.ExecContext(ctx, q.sql, ids[q.name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ClearJob(ctx, ids["ended"]); err != nil {
		t.Fatal(err)
	}

	left, err := s.LeftJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []LeftJob{
		{ID: ids["dead"], RunID: "run-dead", OwnerPID: s.me.pid, Name: "batchfit-dead", JobID: "10dead"},
		{ID: ids["dead before the id"], RunID: "run-dead before the id", OwnerPID: s.me.pid, Name: "batchfit-dead before the id"},
		// The machine rebooted, the cluster did not: the job may run still.
		{ID: ids["rebooted"], RunID: "run-rebooted", OwnerPID: s.me.pid, Name: "batchfit-rebooted", JobID: "10rebooted"},
	}
	if !slices.Equal(left, want) {
		t.Fatalf("left\n %+v\nwant\n %+v", left, want)
	}
	for _, j := range left {
		if err := s.ClearJob(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	// A fresh open of the file sees the same; the live and the other
	// host's records stay.
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if left, err := s2.LeftJobs(ctx); err != nil || len(left) != 0 {
		t.Errorf("after clearing: %+v, %v", left, err)
	}
	var n int
	if err := s2.db.QueryRowContext(ctx, `SELECT count(*) FROM live_jobs`).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d records left (%v), want 2 (alive, elsewhere)", n, err)
	}
}

func TestNullRecordsNoJob(t *testing.T) {
	ctx := context.Background()
	id, err := Null{}.JobSubmitting(ctx, "", "batchfit-x")
	if id != 0 || err != nil {
		t.Errorf("Null.JobSubmitting = %d, %v", id, err)
	}
	if err := (Null{}).JobSubmitted(ctx, 0, "1"); err != nil {
		t.Errorf("Null.JobSubmitted = %v", err)
	}
}
