package store

import (
	"context"
	"fmt"
	"time"
)

// LeftJob is a trial job whose batchfit is gone while its record says the
// job may still be queued or running: nobody else cancels it before its
// time limit.
type LeftJob struct {
	ID       int64 // for ClearJob
	RunID    string
	OwnerPID int    // the batchfit that submitted it
	Name     string // the job's name, unique to its trial
	JobID    string // Slurm's job id; "" when batchfit died before sbatch returned it
}

// JobSubmitting records that a trial of the run runID is about to be
// submitted as a Slurm job called name, owned by this process, and returns
// the id that JobSubmitted and ClearJob take. It is written before sbatch
// runs: a batchfit killed while sbatch queues the job leaves a name to find
// it by. It completes even if ctx is canceled: the job is submitted either
// way.
func (s *Store) JobSubmitting(ctx context.Context, runID, name string) (int64, error) {
	const op = "record a trial job"
	ctx = context.WithoutCancel(ctx)
	res, err := s.db.ExecContext(ctx, `
INSERT INTO live_jobs (run_id, name, job_id, owner_pid, owner_start, owner_boot, owner_host, started)
VALUES (?, ?, '', ?, ?, ?, ?, ?)`,
		runID, name, s.me.pid, s.me.start, s.me.boot, s.me.host, time.Now().UnixNano())
	if err != nil {
		return 0, s.fail(ctx, op, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, s.fail(ctx, op, err)
	}
	return id, nil
}

// JobSubmitted records the job id sbatch returned for the job of record id.
func (s *Store) JobSubmitted(ctx context.Context, id int64, jobID string) error {
	ctx = context.WithoutCancel(ctx)
	if _, err := s.db.ExecContext(ctx, `UPDATE live_jobs SET job_id = ? WHERE id = ?`, jobID, id); err != nil {
		return s.fail(ctx, fmt.Sprintf("record the id of trial job %s", jobID), err)
	}
	return nil
}

// ClearJob removes the record of a job that has left the queue.
func (s *Store) ClearJob(ctx context.Context, id int64) error {
	return s.clearLive(ctx, `DELETE FROM live_jobs WHERE id = ?`, id, fmt.Sprintf("clear trial job record %d", id))
}

// LeftJobs lists the trial jobs recorded as queued whose batchfit has died
// on this machine, oldest first. Unlike a trial's processes, a job outlives
// a reboot of the machine that submitted it (it runs on the cluster's
// nodes), so an owner of an earlier boot counts as dead, not its job.
// Records of another host, or of a batchfit still alive, are left alone.
func (s *Store) LeftJobs(ctx context.Context) ([]LeftJob, error) {
	const op = "list trial jobs left queued"
	rows, err := s.db.QueryContext(ctx, `
SELECT id, run_id, name, job_id, owner_pid, owner_start, owner_boot, owner_host
FROM live_jobs ORDER BY id`)
	if err != nil {
		return nil, s.fail(ctx, op, err)
	}
	defer rows.Close()
	var left []LeftJob
	for rows.Next() {
		var j LeftJob
		var o owner
		if err := rows.Scan(&j.ID, &j.RunID, &j.Name, &j.JobID, &o.pid, &o.start, &o.boot, &o.host); err != nil {
			return nil, s.fail(ctx, op, err)
		}
		j.OwnerPID = o.pid
		if o.host == s.me.host && s.me.gone(o) {
			left = append(left, j)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, err)
	}
	return left, nil
}
