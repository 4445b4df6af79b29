package procgroup

import "fmt"

// PlatformError refuses to start a trial, warm worker or fork server on a
// system where batchfit cannot control one (CheckPlatform): it was refused
// before anything started. The CLI prints it with its hint, exit code 1.
type PlatformError struct {
	OS string // the system, as its users name it: "macOS"
}

func (e *PlatformError) Error() string {
	return fmt.Sprintf("local trials need Linux (process groups, cgroups and /proc control each trial); this is %s", e.OS)
}

// Hint says where trials run, and what works here.
func (e *PlatformError) Hint() string {
	return fmt.Sprintf("run batchfit on the Linux GPU machine; on %s, show, history, cache and cards work", e.OS)
}
