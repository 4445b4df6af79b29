package procgroup

import (
	"errors"
	"runtime"
	"testing"
)

// The refusal macOS users see, tested here since no test runs on macOS.
func TestPlatformError(t *testing.T) {
	err := &PlatformError{OS: "macOS"}
	if got, want := err.Error(), "local trials need Linux (process groups, cgroups and /proc control each trial); this is macOS"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := err.Hint(), "run batchfit on the Linux GPU machine; on macOS, show, history, cache and cards work"; got != want {
		t.Errorf("Hint() = %q, want %q", got, want)
	}
}

func TestCheckPlatform(t *testing.T) {
	err := CheckPlatform()
	var pe *PlatformError
	if runtime.GOOS == "linux" && err != nil {
		t.Errorf("CheckPlatform() on Linux = %v, want nil", err)
	}
	if runtime.GOOS != "linux" && !errors.As(err, &pe) {
		t.Errorf("CheckPlatform() on %s = %v, want a *PlatformError", runtime.GOOS, err)
	}
}
