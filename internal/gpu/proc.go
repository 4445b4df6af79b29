package gpu

import "github.com/batchfit/batchfit/internal/procfs"

// statFunc reads one process's entry; the sampler holds one so that tests
// can fake a process tree. The real one is procfs.ReadStat: a trial's tree
// is found by reading upward from the few PIDs that NVML lists, not by
// walking all of /proc, which on a busy node costs milliseconds, 40 times a
// second.
type statFunc func(pid int) (procfs.Stat, error)
