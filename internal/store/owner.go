package store

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/batchfit/batchfit/internal/procfs"
)

// owner identifies the batchfit process that writes a run. A pid alone is not
// enough: pids are reused, so the process start time (and the boot it counts
// from) tells the original process from a newcomer with the same pid.
type owner struct {
	pid   int
	start int64  // clock ticks after boot, /proc/PID/stat field 22; 0 if unknown
	boot  string // /proc/sys/kernel/random/boot_id; "" if unknown
	host  string
}

// self describes the current process.
func self() owner {
	o := owner{pid: os.Getpid()}
	if st, err := procfs.ReadStat(o.pid); err == nil {
		o.start = int64(st.Start)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		o.boot = strings.TrimSpace(string(b))
	}
	o.host, _ = os.Hostname()
	return o
}

// gone reports whether the process o has certainly ended, as seen from me.
// When it cannot tell (another host, or no /proc), it answers false: a run
// is only declared interrupted on evidence.
func (me owner) gone(o owner) bool {
	if o.host != me.host {
		// The cache dir may be shared between machines (an NFS home); a pid
		// means nothing here.
		return false
	}
	if o.boot != "" && me.boot != "" && o.boot != me.boot {
		return true
	}
	if o.pid <= 0 {
		return true
	}
	if !processExists(o.pid) {
		return true
	}
	if me.start == 0 {
		return false // no /proc: the pid exists and that is all we know
	}
	st, err := procfs.ReadStat(o.pid)
	if err != nil {
		// It existed a moment ago; if its stat is gone now, so is it.
		return errors.Is(err, fs.ErrNotExist)
	}
	if st.Dead() {
		return true // killed, not yet reaped by its parent
	}
	return o.start != 0 && int64(st.Start) != o.start
}
