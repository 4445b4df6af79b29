// Package store keeps the history of batchfit runs in a SQLite file and
// answers repeated searches from it. Every run and trial is written as it
// happens, so a run cut short by Ctrl-C or SIGKILL is still on record and is
// shown as interrupted, never half-written.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors callers branch on. Each comes wrapped with the operation and the
// database path, so the message alone tells the user which file is at fault.
var (
	// ErrLocked means another process held the database for longer than the
	// busy timeout.
	ErrLocked = errors.New("database is locked by another process")
	// ErrCorrupt means the file is not a SQLite database, is damaged, or is a
	// SQLite database that batchfit did not write.
	ErrCorrupt = errors.New("database is corrupt or not a batchfit database")
	// ErrNewer means a newer batchfit wrote the database with a schema this
	// one does not know.
	ErrNewer = errors.New("database was written by a newer batchfit")
	// ErrOlder means the database has an older schema, which a read-only
	// open cannot bring up to date.
	ErrOlder = errors.New("database was written by an older batchfit")
	// ErrNotFound means no run has the given id or id prefix.
	ErrNotFound = errors.New("no such run")
	// ErrAmbiguous means an id prefix matches more than one run.
	ErrAmbiguous = errors.New("run id prefix is ambiguous")
)

// busyTimeoutMS is how long a statement waits for another process's lock
// before it gives up with ErrLocked. Trials are seconds apart and writes take
// milliseconds, so a lock held longer than this is a stuck or foreign writer,
// and the user is better served by a prompt error than by a hang.
const busyTimeoutMS = 2000

// applicationID marks the file as batchfit's ("bfit"), so a SQLite database
// of another program is refused rather than written into.
const applicationID = 0x62666974

// Store is an open batchfit database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
	me   owner // this process, recorded as the owner of the runs it begins
}

// DefaultPath is where the database lives unless --db says otherwise:
// $XDG_CACHE_HOME/batchfit/batchfit.db, else the platform's user cache dir.
func DefaultPath() (string, error) {
	dir := os.Getenv("XDG_CACHE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("find the cache dir: %w", err)
		}
		dir = d
	}
	return filepath.Join(dir, "batchfit", "batchfit.db"), nil
}

// Open opens the database at path, creating it (mode 0600, its directory
// 0700) if it is missing, and brings its schema up to date. A file that is not
// a batchfit database gives ErrCorrupt and is left untouched; a database held
// by another process gives ErrLocked after the busy timeout.
func Open(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// Create the file ourselves: SQLite would create it 0644, and the history
	// holds command lines and paths that are nobody else's business. SQLite
	// gives its -wal and -shm files the database file's mode.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	f.Close()

	// Every transaction begins IMMEDIATE: a deferred one that reads and then
	// writes can fail at once with SQLITE_BUSY_SNAPSHOT in WAL mode, without
	// waiting out the busy timeout.
	dsn := "file:" + escapeURIPath(abs) +
		fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_txlock=immediate", busyTimeoutMS)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	// One connection: writes are serialized by SQLite anyway, and within this
	// process the pool's queue then orders them instead of busy retries.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: abs, me: self()}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	// WAL only after the schema check, so a foreign database is never
	// converted. WAL lets `batchfit history` read while a search writes.
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		db.Close()
		return nil, s.fail(ctx, "open store", err)
	}
	return s, nil
}

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// migrations[i] brings the schema from user_version i to i+1. Append only:
// a released migration is never edited.
var migrations = []string{
	`
CREATE TABLE runs (
	id          TEXT PRIMARY KEY,
	fingerprint TEXT NOT NULL,
	command_key TEXT NOT NULL,
	status      TEXT NOT NULL,
	started     INTEGER NOT NULL, -- unix nanoseconds
	updated     INTEGER NOT NULL, -- unix nanoseconds of the last write
	answer      INTEGER NOT NULL,
	gpu_name    TEXT NOT NULL,
	cached      INTEGER NOT NULL, -- 1 when the run was answered from the store
	owner_pid   INTEGER NOT NULL, -- the batchfit process that writes the run
	owner_start INTEGER NOT NULL, -- its start time, clock ticks after boot
	owner_boot  TEXT NOT NULL,
	owner_host  TEXT NOT NULL,
	json        TEXT NOT NULL     -- record.Run without its trials
) STRICT;
CREATE INDEX runs_by_started ON runs(started);
CREATE INDEX runs_by_fingerprint ON runs(fingerprint, status, started);
CREATE INDEX runs_by_command ON runs(command_key, status, started);
CREATE TABLE trials (
	run_id  TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	n       INTEGER NOT NULL,
	size    INTEGER NOT NULL,
	outcome TEXT NOT NULL,
	seconds REAL NOT NULL,
	json    TEXT NOT NULL, -- record.Trial
	PRIMARY KEY (run_id, n)
) STRICT, WITHOUT ROWID;
`,
	`
CREATE TABLE live_trials (
	id          INTEGER PRIMARY KEY,
	run_id      TEXT NOT NULL,    -- no foreign key: the processes outlive any run record
	pid         INTEGER NOT NULL, -- the trial's leader
	pgid        INTEGER NOT NULL, -- its process group
	start       INTEGER NOT NULL, -- the leader's start time, clock ticks after boot
	cgroup      TEXT NOT NULL,    -- the trial's cgroup directory; '' when none
	cookie      TEXT NOT NULL,    -- BATCHFIT_TRIAL_COOKIE of its processes
	owner_pid   INTEGER NOT NULL, -- the batchfit that runs the trial
	owner_start INTEGER NOT NULL,
	owner_boot  TEXT NOT NULL,
	owner_host  TEXT NOT NULL,
	started     INTEGER NOT NULL  -- unix nanoseconds
) STRICT;
`,
	// reusable is 0 once `batchfit history clear` took the run's answer out of
	// use; the run stays in the history and still seeds close searches.
	`
ALTER TABLE runs ADD COLUMN reusable INTEGER NOT NULL DEFAULT 1;
`,
	// A trial run as a Slurm job is recorded by its name before sbatch
	// runs, and by its id once sbatch returns it: batchfit may die between
	// the two.
	`
CREATE TABLE live_jobs (
	id          INTEGER PRIMARY KEY,
	run_id      TEXT NOT NULL,    -- no foreign key: the job outlives any run record
	name        TEXT NOT NULL,    -- the job's name, unique to its trial
	job_id      TEXT NOT NULL,    -- Slurm's job id; '' until sbatch returned it
	owner_pid   INTEGER NOT NULL, -- the batchfit that submits the job
	owner_start INTEGER NOT NULL,
	owner_boot  TEXT NOT NULL,
	owner_host  TEXT NOT NULL,
	started     INTEGER NOT NULL  -- unix nanoseconds
) STRICT;
`,
	// What a trial's process held outside its framework's allocator (the
	// CUDA context, kernels, library handles) on one kind of GPU, driver
	// and framework: the first trial of the next search is capped by it.
	`
CREATE TABLE outside (
	gpu       TEXT NOT NULL, -- the GPU's model, as NVML names it
	driver    TEXT NOT NULL, -- the driver's version
	framework TEXT NOT NULL, -- the framework and its version, as the run records them
	bytes     INTEGER NOT NULL,
	updated   INTEGER NOT NULL, -- unix nanoseconds
	PRIMARY KEY (gpu, driver, framework)
) STRICT, WITHOUT ROWID;
`,
}

// migrate checks that the file is a batchfit database (or empty) and applies
// the migrations it lacks, all in one transaction so that two batchfits
// opening a new file at once cannot both create the schema.
func (s *Store) migrate(ctx context.Context) error {
	const op = "open store"
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	defer tx.Rollback()
	var app, version, objects int
	if err := tx.QueryRowContext(ctx, "PRAGMA application_id").Scan(&app); err != nil {
		return s.fail(ctx, op, err)
	}
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.fail(ctx, op, err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&objects); err != nil {
		return s.fail(ctx, op, err)
	}
	fresh := app == 0 && version == 0 && objects == 0
	if err := s.notOurs(op, app, version, fresh); err != nil {
		return err
	}
	if version == len(migrations) {
		return nil
	}
	for v := version; v < len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return s.fail(ctx, fmt.Sprintf("%s: migrate to schema %d", op, v+1), err)
		}
	}
	// PRAGMA takes no bound parameters; both values are our own integers.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id=%d; PRAGMA user_version=%d", applicationID, len(migrations))); err != nil {
		return s.fail(ctx, op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}

// notOurs is the error for a database that this batchfit must not use: one
// of another program (unless fresh: an empty file, which becomes batchfit's)
// or of a newer batchfit's schema. It is nil for batchfit's own, of this
// schema or an older one.
func (s *Store) notOurs(op string, app, version int, fresh bool) error {
	switch {
	case !fresh && app != applicationID:
		return fmt.Errorf("%s %s: %w: application id %#x, schema of another program", op, s.path, ErrCorrupt, app)
	case version > len(migrations):
		return fmt.Errorf("%s %s: %w (schema version %d, this one knows %d)", op, s.path, ErrNewer, version, len(migrations))
	}
	return nil
}

// fail wraps err from SQLite with what was being done and the path, turning
// lock and corruption codes into ErrLocked and ErrCorrupt.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%s %s: %w", op, s.path, ErrLocked)
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%s %s: %w (%v)", op, s.path, ErrCorrupt, err)
		}
	}
	return fmt.Errorf("%s %s: %w", op, s.path, err)
}

// escapeURIPath escapes the characters that would end or change the path part
// of a SQLite URI filename; SQLite decodes %XX escapes in it.
func escapeURIPath(p string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return r.Replace(filepath.ToSlash(p))
}
