package adapter

import (
	"context"
	"strconv"
)

// TFLimitEnv tells the hook to give every GPU a logical device of that many
// MiB as soon as the program imports TensorFlow, before it creates its
// devices: TensorFlow has no environment variable for it.
const TFLimitEnv = "BATCHFIT_TF_MEMORY_LIMIT_MB"

// TensorFlow is TensorFlow 2: the hook reports get_memory_info()'s peak per
// GPU and holds the program to --memory-limit with a logical device memory
// limit. It is untested on real TensorFlow (there is no package of it on
// batchfit's build machines), only against a stand-in of its API.
type TensorFlow struct{}

// Name is "tensorflow".
func (TensorFlow) Name() string { return FrameworkTensorFlow }

// Hooked is true: the hook sets the limit and reports the peaks.
func (TensorFlow) Hooked() bool { return true }

// LimitEnv asks the hook for a logical device limit of limit bytes, in whole
// MiB (at least one), as TensorFlow takes it.
func (TensorFlow) LimitEnv(env []string, limit, _ uint64) []string {
	if limit == 0 {
		return env
	}
	mb := max(limit>>20, 1)
	return append(Without(env, TFLimitEnv), TFLimitEnv+"="+strconv.FormatUint(mb, 10))
}

// Peaks are TensorFlow's largest device peak and its logical device limit.
func (TensorFlow) Peaks(s Summary) Peaks {
	return Peaks{Allocated: s.MaxAllocated, Limit: s.MemoryLimit}
}

// EnforcesLimit is true when TensorFlow reported a logical device limit:
// its allocator fails the trial at it.
func (TensorFlow) EnforcesLimit(s Summary) bool {
	return s.Framework == FrameworkTensorFlow && s.MemoryLimit > 0
}

// Version is tensorflow's.
func (TensorFlow) Version(ctx context.Context, argv []string) string {
	return Versions(ctx, argv, "tensorflow")
}
