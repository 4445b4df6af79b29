package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
)

// OpenReadOnly opens the database at path for reading only, as a history
// on a read-only file system, or one whose file or folder batchfit may not
// write, has to be read: nothing is created, migrated or written, and a
// Store opened so refuses every write. A schema older than this batchfit's
// is refused too, since reading it would take a migration.
//
// SQLite reads a WAL database only where it can make the -shm file beside
// it; where it cannot, the file is read as immutable, which is what a
// read-only file system makes it (what its -wal file holds is not seen).
func OpenReadOnly(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	var firstErr error
	for _, mode := range []string{"mode=ro", "immutable=1"} {
		dsn := "file:" + escapeURIPath(abs) + "?" + mode + fmt.Sprintf("&_pragma=busy_timeout(%d)", busyTimeoutMS)
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", abs, err)
		}
		db.SetMaxOpenConns(1)
		s := &Store{db: db, path: abs, me: self()}
		if err = s.checkSchema(ctx); err == nil {
			return s, nil
		}
		db.Close()
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewer) || errors.Is(err, ErrOlder) {
			return nil, err // the file was read: it is what it is
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// checkSchema checks, without writing, that the database is batchfit's and
// of this batchfit's schema.
func (s *Store) checkSchema(ctx context.Context) error {
	const op = "open store"
	var app, version int
	if err := s.db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&app); err != nil {
		return s.fail(ctx, op, err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.fail(ctx, op, err)
	}
	if err := s.notOurs(op, app, version, false); err != nil {
		return err
	}
	if version < len(migrations) {
		return fmt.Errorf("%s %s: %w (schema version %d): open it once where it can be written, to bring it up to date", op, s.path, ErrOlder, version)
	}
	// A query of a table makes SQLite read the file for real: a WAL
	// database it cannot read fails here, not at the caller's first query.
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM runs").Scan(&n); err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}
