package worker

import (
	"github.com/batchfit/batchfit/internal/adapter"
)

// Environ returns a worker's environment: base, with pythonPath (from
// adapter.Install) in front of PYTHONPATH so that "python -m
// batchfit.worker" finds the batchfit package, without an adapter report
// file (the worker reports over its channel), and with the framework's
// allocator held to limit bytes of a device of total bytes (0: no limit),
// the way a fresh trial under --memory-limit gets it.
func Environ(base []string, pythonPath string, fw adapter.Framework, limit, total uint64) []string {
	return fw.LimitEnv(adapter.Env(base, pythonPath, ""), limit, total)
}
