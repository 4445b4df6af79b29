package slurm

import (
	"testing"
	"time"
)

// A real line of `scontrol -o show job` from Slurm 22.05 (the test cluster).
const scontrolLine = "JobId=1 JobName=j.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0 DerivedExitCode=0:0 RunTime=00:00:01 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-29T20:31:13 EligibleTime=2026-11-29T20:31:13 AccrueTime=2026-11-29T20:31:13 StartTime=2026-11-29T20:31:14 EndTime=2026-11-29T20:31:15 Deadline=N/A Command=/tmp/a JobState=X ExitCode=9:9 WorkDir=/tmp/sx StdErr=/tmp/sx/o1.txt StdIn=/dev/null StdOut=/tmp/sx/o1.txt Power= TresPerNode=gres:gpu:2\n"

func TestParseScontrol(t *testing.T) {
	j, err := parseScontrol(scontrolLine)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 29, 20, 31, 14, 0, time.Local)
	want := jobEnd{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 3, Start: start, End: start.Add(time.Second)}
	if j != want {
		t.Errorf("got %+v\nwant %+v", j, want)
	}
	for _, bad := range []string{"", "slurm_load_jobs error: Invalid job id specified", "JobId=1 JobState=FAILED ExitCode=x"} {
		if _, err := parseScontrol(bad); err == nil {
			t.Errorf("parseScontrol(%q): no error", bad)
		}
	}
}

func TestParseSacct(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want jobEnd
		bad  bool
	}{
		{out: "COMPLETED|0:0|2026-11-29T20:31:14|2026-11-29T20:31:15\n", want: jobEnd{State: "COMPLETED",
			Start: time.Date(2026, 11, 29, 20, 31, 14, 0, time.Local), End: time.Date(2026, 11, 29, 20, 31, 15, 0, time.Local)}},
		{out: "CANCELLED by 1000|0:15|2026-11-29T20:31:14|Unknown\n", want: jobEnd{State: "CANCELLED", Signal: 15,
			Start: time.Date(2026, 11, 29, 20, 31, 14, 0, time.Local)}},
		{out: "OUT_OF_MEMORY|0:125|None|None", want: jobEnd{State: "OUT_OF_MEMORY", Signal: 125}},
		{out: "", bad: true},
		{out: "FAILED|1|x|y", bad: true},
	} {
		got, err := parseSacct(tc.out)
		if tc.bad {
			if err == nil {
				t.Errorf("parseSacct(%q): no error", tc.out)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseSacct(%q) = %+v, %v\nwant %+v", tc.out, got, err, tc.want)
		}
	}
}

func TestPhaseOf(t *testing.T) {
	for state, want := range map[string]phase{
		"PENDING": waiting, "CONFIGURING": waiting, "REQUEUED": waiting, "REQUEUE_HOLD": waiting, "SOMETHING_NEW": waiting,
		"RUNNING": running, "COMPLETING": running, "SUSPENDED": running,
		"COMPLETED": finished, "FAILED": finished, "CANCELLED": finished, "TIMEOUT": finished,
		"OUT_OF_MEMORY": finished, "NODE_FAIL": finished, "PREEMPTED": finished, "BOOT_FAIL": finished, "DEADLINE": finished,
	} {
		if got := phaseOf(state); got != want {
			t.Errorf("phaseOf(%s) = %d, want %d", state, got, want)
		}
	}
}
