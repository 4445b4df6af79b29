package trial

// Process names a started trial, for the record that lets a later batchfit
// stop it when this one dies first (SIGKILL, a crash) and leaves the
// trial's processes running with parent 1.
type Process struct {
	// PID is the leader's; it is also the trial's process group id.
	PID int
	// Start is the leader's start time in clock ticks after boot, so that a
	// reused pid is never taken for the leader.
	Start uint64
	// Cgroup is the trial's own cgroup directory; "" when it has none.
	Cgroup string
	// Cookie is the value of BATCHFIT_TRIAL_COOKIE in the environment of
	// the trial's processes.
	Cookie string
}
