package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Machine is a kind of GPU process: the GPU's model, its driver and the
// framework with its version. What such a process holds outside its
// framework's allocator is much the same from one program to the next.
type Machine struct {
	GPU, Driver, Framework string
}

// Outside returns what trials on m last held outside their allocator, 0
// when no run on m recorded it.
func (s *Store) Outside(ctx context.Context, m Machine) (uint64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, "SELECT bytes FROM outside WHERE gpu = ? AND driver = ? AND framework = ?",
		m.GPU, m.Driver, m.Framework).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, s.fail(ctx, "read the memory outside the allocator", err)
	}
	return uint64(n), nil
}

// NoteOutside records what a run's trials on m held outside their
// allocator, in place of what an earlier run recorded.
func (s *Store) NoteOutside(ctx context.Context, m Machine, bytes uint64) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO outside (gpu, driver, framework, bytes, updated) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (gpu, driver, framework) DO UPDATE SET bytes = excluded.bytes, updated = excluded.updated`,
		m.GPU, m.Driver, m.Framework, int64(bytes), time.Now().UnixNano())
	if err != nil {
		return s.fail(ctx, "record the memory outside the allocator", err)
	}
	return nil
}

// Outside knows nothing.
func (Null) Outside(context.Context, Machine) (uint64, error) { return 0, nil }

// NoteOutside records nothing.
func (Null) NoteOutside(context.Context, Machine, uint64) error { return nil }
