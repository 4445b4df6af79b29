package sim

import (
	"context"

	"github.com/batchfit/batchfit/internal/adapter"
)

// Framework is what a simulated trial plays: PyTorch, whose allocator
// takes its cap from PYTORCH_CUDA_ALLOC_CONF and whose peaks arrive in the
// adapter's report, which the child writes itself. There is no Python to
// hook, and no installed torch to fingerprint.
type Framework struct{ adapter.Torch }

var _ adapter.Framework = Framework{}

// Hooked is false: the child is batchfit itself, not a Python program.
func (Framework) Hooked() bool { return false }

// Version is unknown before a trial.
func (Framework) Version(context.Context, []string) string { return "" }
