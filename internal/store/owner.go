package store

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
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
	if st, err := procStat(o.pid); err == nil {
		o.start = st.start
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
	st, err := procStat(o.pid)
	if err != nil {
		// It existed a moment ago; if its stat is gone now, so is it.
		return os.IsNotExist(err)
	}
	if st.state == 'Z' || st.state == 'X' {
		return true // killed, not yet reaped by its parent
	}
	return o.start != 0 && st.start != o.start
}

type stat struct {
	state byte
	start int64
}

// procStat reads the state (field 3) and start time (field 22) of pid from
// /proc/PID/stat.
func procStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	// Field 2 is the command name in parentheses and may itself contain
	// spaces and parentheses; the fields after the last ')' are plain.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("parse /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	start, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("parse /proc/%d/stat start time: %w", pid, err)
	}
	return stat{state: f[0][0], start: start}, nil
}
