package store

import (
	"context"
	"fmt"
	"time"
)

// TrialProcess names the processes of a running trial, as internal/trial
// reports them when the trial starts: enough for a later batchfit to stop
// them should the one running the trial die first.
type TrialProcess struct {
	PID    int    // the leader
	PGID   int    // its process group
	Start  uint64 // the leader's start time, clock ticks after boot
	Cgroup string // the trial's cgroup directory; "" when it has none
	Cookie string // BATCHFIT_TRIAL_COOKIE in its processes' environment
}

// LeftTrial is a trial whose batchfit is gone while its record says it
// runs: its processes may still be alive.
type LeftTrial struct {
	ID       int64 // for ClearTrial
	RunID    string
	OwnerPID int // the batchfit that ran it
	TrialProcess
}

// TrialStarted records that a trial of the run runID started, owned by this
// process, and returns the id ClearTrial takes once its processes are gone.
// It completes even if ctx is canceled: the trial runs either way.
func (s *Store) TrialStarted(ctx context.Context, runID string, p TrialProcess) (int64, error) {
	const op = "record trial processes"
	ctx = context.WithoutCancel(ctx)
	res, err := s.db.ExecContext(ctx, `
INSERT INTO live_trials (run_id, pid, pgid, start, cgroup, cookie,
                         owner_pid, owner_start, owner_boot, owner_host, started)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		runID, p.PID, p.PGID, int64(p.Start), p.Cgroup, p.Cookie,
		s.me.pid, s.me.start, s.me.boot, s.me.host, time.Now().UnixNano())
	if err != nil {
		return 0, s.fail(ctx, op, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, s.fail(ctx, op, err)
	}
	return id, nil
}

// ClearTrial removes the record of a trial whose processes are gone.
func (s *Store) ClearTrial(ctx context.Context, id int64) error {
	return s.clearLive(ctx, `DELETE FROM live_trials WHERE id = ?`, id, fmt.Sprintf("clear trial record %d", id))
}

// clearLive runs del, which deletes the live record id, doing what. It
// completes even if ctx is canceled: what it records is gone either way.
func (s *Store) clearLive(ctx context.Context, del string, id int64, what string) error {
	ctx = context.WithoutCancel(ctx)
	if _, err := s.db.ExecContext(ctx, del, id); err != nil {
		return s.fail(ctx, what, err)
	}
	return nil
}

// LeftTrials lists the trials recorded as running whose batchfit has died
// on this machine since this boot, oldest first. Records from an earlier
// boot name no process any more; they are deleted, not returned. Records
// of another host, or of a batchfit still alive, are left alone.
func (s *Store) LeftTrials(ctx context.Context) ([]LeftTrial, error) {
	const op = "list trials left running"
	rows, err := s.db.QueryContext(ctx, `
SELECT id, run_id, pid, pgid, start, cgroup, cookie, owner_pid, owner_start, owner_boot, owner_host
FROM live_trials ORDER BY id`)
	if err != nil {
		return nil, s.fail(ctx, op, err)
	}
	defer rows.Close()
	var left []LeftTrial
	var rebooted []int64
	for rows.Next() {
		var t LeftTrial
		var start int64
		var o owner
		if err := rows.Scan(&t.ID, &t.RunID, &t.PID, &t.PGID, &start, &t.Cgroup, &t.Cookie,
			&o.pid, &o.start, &o.boot, &o.host); err != nil {
			return nil, s.fail(ctx, op, err)
		}
		t.Start, t.OwnerPID = uint64(start), o.pid
		switch {
		case o.host != s.me.host:
		case o.boot != "" && s.me.boot != "" && o.boot != s.me.boot:
			rebooted = append(rebooted, t.ID)
		case s.me.gone(o):
			left = append(left, t)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, err)
	}
	rows.Close()
	for _, id := range rebooted {
		if err := s.ClearTrial(ctx, id); err != nil {
			return nil, err
		}
	}
	return left, nil
}
