package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/batchfit/batchfit/internal/record"
)

// BeginRun stores a new run as running, owned by this process, with any
// trials it already holds, and sets its ID, Status, Fingerprint and (if zero)
// Started. Call it before the first trial starts, so that even a run killed
// during that trial is on record.
func (s *Store) BeginRun(ctx context.Context, run *record.Run) error {
	const op = "begin run"
	if run == nil {
		return errors.New("begin run: nil run")
	}
	if run.Started.IsZero() {
		run.Started = time.Now()
	}
	run.Status = record.Running
	run.Fingerprint = Fingerprint(run)
	for _, t := range run.Trials {
		if t.N <= 0 {
			return fmt.Errorf("%s: trial number must be 1 or more, got %d", op, t.N)
		}
	}
	var err error
	// The random tail makes a collision rare; a few retries make it moot.
	for range 5 {
		run.ID = newID(run.Started)
		if err = s.insertRun(ctx, run); !isDuplicateKey(err) {
			break
		}
	}
	if err != nil {
		run.ID = ""
		return s.fail(ctx, op, err)
	}
	return nil
}

func (s *Store) insertRun(ctx context.Context, run *record.Run) error {
	body, err := runJSON(run)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `
INSERT INTO runs (id, fingerprint, command_key, status, started, updated, answer, gpu_name, cached,
                  owner_pid, owner_start, owner_boot, owner_host, json)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		run.ID, run.Fingerprint, CommandKey(run), string(run.Status), run.Started.UnixNano(),
		time.Now().UnixNano(), run.Answer, gpuName(run), run.Cached,
		s.me.pid, s.me.start, s.me.boot, s.me.host, body)
	if err != nil {
		return err
	}
	for _, t := range run.Trials {
		if err := putTrial(ctx, tx, run.ID, t); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// AddTrial stores one finished trial of a running run, in its own
// transaction. Trials are keyed by N: storing the same N again replaces it.
// It finishes its write even if ctx is canceled, because the trial happened;
// the busy timeout still bounds it.
func (s *Store) AddTrial(ctx context.Context, runID string, t record.Trial) error {
	op := fmt.Sprintf("store trial %d of run %s", t.N, runID)
	ctx = context.WithoutCancel(ctx)
	if t.N <= 0 {
		return fmt.Errorf("%s: trial number must be 1 or more", op)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE runs SET updated = ? WHERE id = ? AND status = 'running'`,
		time.Now().UnixNano(), runID)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var status string
		err := tx.QueryRowContext(ctx, `SELECT status FROM runs WHERE id = ?`, runID).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s: %w", op, ErrNotFound)
		}
		if err != nil {
			return s.fail(ctx, op, err)
		}
		return fmt.Errorf("%s: the run is %s, not running", op, status)
	}
	if err := putTrial(ctx, tx, runID, t); err != nil {
		return s.fail(ctx, op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}

// FinishRun stores the final record of a run begun with BeginRun: its status,
// answer and every other field, in one transaction. Trials in run.Trials are
// stored (replacing those with the same N); trials stored earlier by AddTrial
// stay. It recomputes run.Fingerprint, because facts such as the torch
// version are only known once trials have run, and sets Finished if zero.
// Like AddTrial it completes even if ctx is canceled, so a run stopped by
// Ctrl-C is recorded as interrupted rather than left running.
func (s *Store) FinishRun(ctx context.Context, run *record.Run) error {
	if run == nil {
		return errors.New("finish run: nil run")
	}
	op := "finish run " + run.ID
	ctx = context.WithoutCancel(ctx)
	switch run.Status {
	case record.Found, record.NothingFits, record.Failed, record.Interrupted:
	default:
		return fmt.Errorf("%s: status %q is not a final status", op, run.Status)
	}
	for _, t := range run.Trials {
		if t.N <= 0 {
			return fmt.Errorf("%s: trial number must be 1 or more, got %d", op, t.N)
		}
	}
	if run.Finished.IsZero() {
		run.Finished = time.Now()
	}
	run.Fingerprint = Fingerprint(run)
	body, err := runJSON(run)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `
UPDATE runs SET fingerprint = ?, command_key = ?, status = ?, started = ?, updated = ?, answer = ?,
                gpu_name = ?, cached = ?, json = ?
WHERE id = ?`,
		run.Fingerprint, CommandKey(run), string(run.Status), run.Started.UnixNano(), time.Now().UnixNano(),
		run.Answer, gpuName(run), run.Cached, body, run.ID)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	for _, t := range run.Trials {
		if err := putTrial(ctx, tx, run.ID, t); err != nil {
			return s.fail(ctx, op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}

// Get returns the run whose id is idOrPrefix, or the one run whose id starts
// with it, with its trials. No match is ErrNotFound; several are ErrAmbiguous.
func (s *Store) Get(ctx context.Context, idOrPrefix string) (*record.Run, error) {
	op := fmt.Sprintf("get run %q", idOrPrefix)
	prefix, ok := normalizeID(idOrPrefix)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	// Ids are fixed-width lower-case base32, all below "\x7f", so this range
	// is exactly the ids that start with prefix, and it uses the primary key.
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT 4`,
		prefix, prefix+"\x7f")
	if err != nil {
		return nil, s.fail(ctx, op, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, s.fail(ctx, op, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, err)
	}
	switch {
	case len(ids) == 0:
		return nil, fmt.Errorf("%s: %w", op, ErrNotFound)
	case len(ids) > 1:
		more := ""
		if len(ids) > 3 {
			ids, more = ids[:3], ", …"
		}
		return nil, fmt.Errorf("%s: %w: it matches %s%s", op, ErrAmbiguous, strings.Join(ids, ", "), more)
	}
	runs, err := s.query(ctx, op, `WHERE id = ?`, ids[0])
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 { // deleted between the two queries
		return nil, fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	return &runs[0], nil
}

// List returns up to limit runs (all if limit <= 0), newest first, each with
// its trials. A run whose process died without finishing it is reported as
// interrupted.
func (s *Store) List(ctx context.Context, limit int) ([]record.Run, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return s.query(ctx, "list runs", `ORDER BY started DESC, id DESC LIMIT ?`, limit)
}

// Cached returns the newest found run with this fingerprint, with its trials,
// or nil and no error if there is none. Runs that were themselves answered
// from the cache are skipped, so the answer always comes with the trials
// that proved it; so are runs whose answer is not exact (flaky, or at risk
// by its failures' figures), and runs taken out of use by ClearCache.
func (s *Store) Cached(ctx context.Context, fingerprint string) (*record.Run, error) {
	return s.newest(ctx, "look up cached run", "fingerprint", fingerprint, exactSQL+provenSQL+` AND reusable = 1`)
}

// provenSQL leaves out the runs whose answer under a whole-process limit
// was proven in capped trials (the GPU could not be held), which a real
// card may not run: a search on a GPU that can be held proves it again.
const provenSQL = ` AND NOT (COALESCE(json_extract(json, '$.proof'), '') = 'capped' AND json_extract(json, '$.settings.memory_limit_scope') = 'process')`

// exactSQL selects the runs whose answer is exact: not flaky, and not at
// risk by its failures' figures.
const exactSQL = `AND COALESCE(json_array_length(json, '$.flaky'), 0) = 0 AND json_extract(json, '$.at_risk') IS NULL`

// ClearCache takes every run's answer out of use as a cached answer and
// returns how many it took. The runs stay in the history (history, show)
// and still seed the start of a close search.
func (s *Store) ClearCache(ctx context.Context) (int, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET reusable = 0 WHERE reusable = 1 AND status = 'found' AND cached = 0 `+exactSQL+provenSQL)
	if err != nil {
		return 0, s.fail(ctx, "clear the cache", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Nearest returns the newest found run of the same command in the same
// directory (see CommandKey), on any GPU and under any memory limit, with its
// trials, or nil and no error if there is none. Its answer and memory figures
// are a starting point for a new search, not an answer to it.
func (s *Store) Nearest(ctx context.Context, commandKey string) (*record.Run, error) {
	return s.newest(ctx, "look up nearest run", "command_key", commandKey, "")
}

func (s *Store) newest(ctx context.Context, op, column, value, also string) (*record.Run, error) {
	// column and also are constants above, never user input.
	runs, err := s.query(ctx, op,
		`WHERE `+column+` = ? AND status = 'found' AND cached = 0 `+also+` ORDER BY started DESC, id DESC LIMIT 1`, value)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return &runs[0], nil
}

// stored is a runs row as read back.
type stored struct {
	run     record.Run
	updated int64
	owner   owner
}

// query reads the runs selected by tail (a WHERE/ORDER/LIMIT clause), adds
// their trials and settles those whose owner is gone.
func (s *Store) query(ctx context.Context, op, tail string, args ...any) ([]record.Run, error) {
	rows, err := s.db.QueryContext(ctx, `
SELECT id, status, updated, owner_pid, owner_start, owner_boot, owner_host, json FROM runs `+tail, args...)
	if err != nil {
		return nil, s.fail(ctx, op, err)
	}
	var got []stored
	for rows.Next() {
		var (
			st     stored
			id     string
			status string
			body   []byte
		)
		err := rows.Scan(&id, &status, &st.updated, &st.owner.pid, &st.owner.start, &st.owner.boot, &st.owner.host, &body)
		if err != nil {
			rows.Close()
			return nil, s.fail(ctx, op, err)
		}
		if err := json.Unmarshal(body, &st.run); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%s %s: run %s: %w (%v)", op, s.path, id, ErrCorrupt, err)
		}
		// The columns are what queries and the lazy rewrite go by.
		st.run.ID, st.run.Status, st.run.Trials = id, record.Status(status), nil
		got = append(got, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, err)
	}
	if err := s.addTrials(ctx, op, got); err != nil {
		return nil, err
	}
	s.settle(ctx, got)
	runs := make([]record.Run, len(got))
	for i := range got {
		runs[i] = got[i].run
	}
	return runs, nil
}

// addTrials reads the trials of runs, in order of N.
func (s *Store) addTrials(ctx context.Context, op string, runs []stored) error {
	index := make(map[string]int, len(runs))
	for i := range runs {
		index[runs[i].run.ID] = i
	}
	// Chunks keep the statement well under SQLite's limit on parameters.
	const chunk = 500
	for lo := 0; lo < len(runs); lo += chunk {
		hi := min(lo+chunk, len(runs))
		args := make([]any, 0, hi-lo)
		for _, r := range runs[lo:hi] {
			args = append(args, r.run.ID)
		}
		marks := strings.TrimSuffix(strings.Repeat("?,", len(args)), ",")
		rows, err := s.db.QueryContext(ctx,
			`SELECT run_id, json FROM trials WHERE run_id IN (`+marks+`) ORDER BY run_id, n`, args...)
		if err != nil {
			return s.fail(ctx, op, err)
		}
		for rows.Next() {
			var (
				id   string
				body []byte
				t    record.Trial
			)
			if err := rows.Scan(&id, &body); err != nil {
				rows.Close()
				return s.fail(ctx, op, err)
			}
			if err := json.Unmarshal(body, &t); err != nil {
				rows.Close()
				return fmt.Errorf("%s %s: trial of run %s: %w (%v)", op, s.path, id, ErrCorrupt, err)
			}
			r := &runs[index[id]].run
			r.Trials = append(r.Trials, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return s.fail(ctx, op, err)
		}
	}
	return nil
}

// settle reports runs left running by a process that is gone as interrupted
// and rewrites them so. The rewrite is best effort: a reader that cannot
// write (the database is busy, or read-only) still shows the right status,
// and the next reader tries again.
func (s *Store) settle(ctx context.Context, runs []stored) {
	var stale []*record.Run
	for i := range runs {
		st := &runs[i]
		if st.run.Status != record.Running || !s.me.gone(st.owner) {
			continue
		}
		r := &st.run
		r.Status = record.Interrupted
		if r.Finished.IsZero() {
			r.Finished = time.Unix(0, st.updated) // the last write it made
		}
		if r.Seconds == 0 && !r.Started.IsZero() {
			r.Seconds = r.Finished.Sub(r.Started).Seconds()
		}
		if r.Error == "" {
			r.Error = fmt.Sprintf("batchfit (pid %d) stopped before the run finished", st.owner.pid)
		}
		stale = append(stale, r)
	}
	if len(stale) == 0 {
		return
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return
	}
	defer tx.Rollback()
	for _, r := range stale {
		body, err := runJSON(r)
		if err != nil {
			return
		}
		// status = 'running' guards against a FinishRun that won the race.
		_, err = tx.ExecContext(ctx, `UPDATE runs SET status = ?, json = ? WHERE id = ? AND status = 'running'`,
			string(r.Status), body, r.ID)
		if err != nil {
			return
		}
	}
	tx.Commit()
}

func putTrial(ctx context.Context, tx *sql.Tx, runID string, t record.Trial) error {
	body, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encode trial: %w", err)
	}
	_, err = tx.ExecContext(ctx, `
INSERT INTO trials (run_id, n, size, outcome, seconds, json) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id, n) DO UPDATE SET size = excluded.size, outcome = excluded.outcome,
                                      seconds = excluded.seconds, json = excluded.json`,
		runID, t.N, t.Size, string(t.Outcome), t.Seconds, string(body))
	return err
}

// runJSON encodes a run without its trials, which live in their own table.
func runJSON(r *record.Run) (string, error) {
	c := *r
	c.Trials = nil
	b, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("encode run: %w", err)
	}
	return string(b), nil
}

// gpuName is the queryable summary of the GPUs: their distinct model names.
func gpuName(r *record.Run) string {
	if r.GPU == nil {
		return ""
	}
	var names []string
	for _, d := range r.GPU.Devices {
		if !slices.Contains(names, d.Name) {
			names = append(names, d.Name)
		}
	}
	return strings.Join(names, ", ")
}

func isDuplicateKey(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}
