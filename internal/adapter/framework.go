package adapter

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Framework is what batchfit knows about the deep-learning framework a
// command trains with. One is chosen per run (Choose) and used by every
// trial, fresh or warm, so that a limit is emulated and a report is read the
// same way everywhere.
type Framework interface {
	// Name is the framework's name as --framework takes it.
	Name() string
	// Hooked says the adapter's hook runs in the trial (it is put on the
	// trial's PYTHONPATH and reports over the private channel).
	Hooked() bool
	// LimitEnv returns env with the variables that hold the framework's
	// allocator to limit bytes of a device of total bytes. It returns env
	// unchanged when the framework has no such switch.
	LimitEnv(env []string, limit, total uint64) []string
	// Peaks reads the framework's own memory figures from a trial's report.
	Peaks(s Summary) Peaks
	// EnforcesLimit says the framework itself failed the trial at the limit
	// that LimitEnv set, so its measured device peak need not be judged
	// against the limit.
	EnforcesLimit(s Summary) bool
	// Version is the framework's installed version for the command's
	// interpreter, "" when unknown; it is part of a run's fingerprint.
	Version(ctx context.Context, argv []string) string
}

// Peaks are a trial's peak memory as the framework counts it, in bytes;
// zero means unknown.
type Peaks struct {
	Allocated uint64 // held by live tensors (torch: max_memory_allocated; JAX: peak_bytes_in_use)
	Reserved  uint64 // held by the framework's pool (torch: max_memory_reserved; JAX: pool_bytes)
	// Limit is the framework's own pool limit when it reports one (JAX's
	// bytes_limit, TensorFlow's logical device limit): the capacity that
	// matters to it, which may be less than the card's.
	Limit uint64
}

// The names --framework takes.
const (
	FrameworkAuto       = "auto"
	FrameworkTorch      = "torch"
	FrameworkJAX        = "jax"
	FrameworkTensorFlow = "tensorflow"
	FrameworkNone       = "none"
)

// frameworks are the frameworks batchfit supports, by name.
var frameworks = map[string]Framework{
	FrameworkTorch:      Torch{},
	FrameworkJAX:        JAX{},
	FrameworkTensorFlow: TensorFlow{},
	FrameworkNone:       None{},
}

// FrameworkNames lists the values --framework accepts, auto first.
func FrameworkNames() []string {
	names := make([]string, 0, len(frameworks)+1)
	for n := range frameworks {
		names = append(names, n)
	}
	slices.Sort(names)
	return append([]string{FrameworkAuto}, names...)
}

// UnknownFrameworkError is a --framework value batchfit does not support.
type UnknownFrameworkError struct{ Name string }

func (e *UnknownFrameworkError) Error() string {
	return fmt.Sprintf("unknown framework %q", e.Name)
}

// Hint lists the frameworks that exist.
func (e *UnknownFrameworkError) Hint() string {
	return "use --framework " + strings.Join(FrameworkNames(), ", ")
}

// Choose returns the framework for argv: the one named, or with "auto" (or
// "") Python for a Python command (IsPython), none otherwise. Which
// framework a Python program uses is not known before it runs, so Python
// serves them all.
func Choose(name string, argv []string) (Framework, error) {
	if name == "" || name == FrameworkAuto {
		if IsPython(argv) {
			return Python{}, nil
		}
		return None{}, nil
	}
	fw, ok := frameworks[name]
	if !ok {
		return nil, &UnknownFrameworkError{Name: name}
	}
	return fw, nil
}

// Torch is PyTorch: the hook reports the caching allocator's peaks, and the
// allocator is capped through PYTORCH_CUDA_ALLOC_CONF's
// per_process_memory_fraction, which torch 2.11 honours.
type Torch struct{}

// Name is "torch".
func (Torch) Name() string { return FrameworkTorch }

// Hooked is true: the hook reports torch's own figures.
func (Torch) Hooked() bool { return true }

// LimitEnv caps the caching allocator at limit/total of the device, merged
// with the user's own allocator options.
func (Torch) LimitEnv(env []string, limit, total uint64) []string {
	if limit == 0 || total == 0 {
		return env
	}
	conf, _ := Lookup(env, AllocConfEnv)
	merged := MergeAllocConf(conf, float64(limit)/float64(total))
	return append(Without(env, AllocConfEnv), AllocConfEnv+"="+merged)
}

// Peaks are max_memory_allocated and max_memory_reserved, the largest of
// any process of the trial.
func (Torch) Peaks(s Summary) Peaks {
	return Peaks{Allocated: s.MaxAllocated, Reserved: s.MaxReserved}
}

// EnforcesLimit is true once torch used CUDA: its allocator was capped.
func (Torch) EnforcesLimit(s Summary) bool { return s.MaxReserved > 0 }

// Version reads torch's version without importing it.
func (Torch) Version(ctx context.Context, argv []string) string { return TorchVersion(ctx, argv) }

// None is a command whose framework batchfit does not know: no hook, no
// limit switch; a limit is held by the measured device peak alone.
type None struct{}

// Name is "none".
func (None) Name() string { return FrameworkNone }

// Hooked is false.
func (None) Hooked() bool { return false }

// LimitEnv returns env unchanged.
func (None) LimitEnv(env []string, _, _ uint64) []string { return env }

// Peaks are unknown.
func (None) Peaks(Summary) Peaks { return Peaks{} }

// EnforcesLimit is false.
func (None) EnforcesLimit(Summary) bool { return false }

// Version is unknown.
func (None) Version(context.Context, []string) string { return "" }
