package slurm

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// phase is where a job is, as far as batchfit's waiting goes.
type phase int

const (
	waiting  phase = iota // queued, requeued, held, its node booting
	running               // its script runs (or is being ended)
	finished              // a final state: read its end with scontrol or sacct
)

// phaseOf maps a Slurm job state (squeue %T, scontrol JobState) to a phase.
// Unknown states count as waiting: batchfit keeps following the job and
// never reads an end that has not happened.
func phaseOf(state string) phase {
	switch state {
	case "RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "SUSPENDED", "RESIZING", "STOPPED":
		return running
	case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
		"BOOT_FAIL", "PREEMPTED", "DEADLINE", "REVOKED", "SPECIAL_EXIT":
		return finished
	}
	return waiting
}

// rerun reports whether a job that ended in state says nothing about the
// trial, so that it should simply run again: it was preempted, or its node
// failed under it.
func rerun(state string) bool {
	switch state {
	case "PREEMPTED", "NODE_FAIL", "BOOT_FAIL":
		return true
	}
	return false
}

// jobEnd is how a finished job ended.
type jobEnd struct {
	State      string // e.g. COMPLETED, FAILED, OUT_OF_MEMORY
	Reason     string // scontrol's Reason; "" from sacct
	ExitCode   int    // the batch script's exit status
	Signal     int    // the signal that ended it; 0 if it exited
	Start, End time.Time
}

// scontrolField matches one key=value field of `scontrol -o show job`;
// values of the keys read here never hold spaces.
func scontrolField(key string) *regexp.Regexp {
	return regexp.MustCompile(`(?:^|\s)` + key + `=(\S*)`)
}

var (
	fieldJobState = scontrolField("JobState")
	fieldReason   = scontrolField("Reason")
	fieldExitCode = scontrolField("ExitCode")
	fieldStart    = scontrolField("StartTime")
	fieldEnd      = scontrolField("EndTime")
)

// parseScontrol reads `scontrol -o show job ID` (one line a job; the first
// is the job asked for).
func parseScontrol(out string) (jobEnd, error) {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	get := func(re *regexp.Regexp) string {
		if m := re.FindStringSubmatch(line); m != nil {
			return m[1]
		}
		return ""
	}
	var j jobEnd
	j.State = get(fieldJobState)
	if j.State == "" {
		return j, fmt.Errorf("no JobState in scontrol's output %q", shorten(out))
	}
	j.Reason = get(fieldReason)
	var err error
	if j.ExitCode, j.Signal, err = parseExitCode(get(fieldExitCode)); err != nil {
		return j, err
	}
	j.Start = parseTime(get(fieldStart))
	j.End = parseTime(get(fieldEnd))
	return j, nil
}

// parseSacct reads `sacct -n -P -X -j ID -o State,ExitCode,Start,End`.
func parseSacct(out string) (jobEnd, error) {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	f := strings.Split(line, "|")
	if len(f) < 4 || f[0] == "" {
		return jobEnd{}, fmt.Errorf("unexpected sacct output %q", shorten(out))
	}
	var j jobEnd
	// "CANCELLED by 1234": the state is the first word.
	j.State, _, _ = strings.Cut(f[0], " ")
	var err error
	if j.ExitCode, j.Signal, err = parseExitCode(f[1]); err != nil {
		return j, err
	}
	j.Start = parseTime(f[2])
	j.End = parseTime(f[3])
	return j, nil
}

// parseExitCode reads Slurm's "exit:signal".
func parseExitCode(s string) (code, sig int, err error) {
	a, b, ok := strings.Cut(s, ":")
	code, err1 := strconv.Atoi(a)
	sig, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || code < 0 || sig < 0 {
		return 0, 0, fmt.Errorf("unexpected ExitCode %q from Slurm", s)
	}
	return code, sig, nil
}

// parseTime reads a Slurm time stamp, which Slurm prints in the local time
// zone of the command; "Unknown", "None" and the like give the zero time.
func parseTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

func shorten(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
