package trial

import (
	"context"

	"github.com/batchfit/batchfit/internal/procgroup"
)

// macOS has none of what run_linux.go stops a trial with (cgroups, /proc,
// pidfd, a child subreaper): batchfit runs no trial here
// (procgroup.CheckPlatform).

// Run refuses: the error is a *StartError wrapping a
// *procgroup.PlatformError, and nothing was started.
func Run(ctx context.Context, spec Spec, w Watcher) (Result, error) {
	return Result{}, &StartError{Op: "start", Err: procgroup.CheckPlatform()}
}

// Stop finds nothing: no trial of a batchfit ran here.
func Stop(p Process) int { return 0 }

// CgroupAvailable is false: macOS has no cgroups.
func CgroupAvailable() bool { return false }
