package report

import "github.com/batchfit/batchfit/internal/record"

// allocatorOnly says run's memory limit held the allocator only: its trials
// are shown by the allocator's reserved memory (record.Trial.Memory).
func allocatorOnly(run *record.Run) bool {
	return run.Settings.MemoryLimitScope == record.ScopeAllocator
}
