package worker

import (
	"strings"

	"github.com/batchfit/batchfit/internal/adapter"
)

// Environ returns a worker's environment: base, with pythonPath (from
// adapter.Install) in front of PYTHONPATH so that "python -m
// batchfit.worker" finds the batchfit package, without an adapter report
// file (the worker reports over its channel), and with torch's caching
// allocator capped at memoryFraction of the device (0: no cap), the way a
// fresh trial under --memory-limit gets it.
func Environ(base []string, pythonPath string, memoryFraction float64) []string {
	env := adapter.Env(base, pythonPath, "")
	if memoryFraction <= 0 {
		return env
	}
	existing := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, adapter.AllocConfEnv+"="); ok {
			existing = v
		}
	}
	return append(withoutKey(env, adapter.AllocConfEnv), adapter.AllocConfEnv+"="+adapter.MergeAllocConf(existing, memoryFraction))
}
