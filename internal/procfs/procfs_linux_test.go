package procfs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	// Fields 7 to 21 and a few after the start time, as a real line has.
	const mid = " 0 -1 4194304 103 0 0 0 0 0 0 0 20 0 1 0"
	const tail = " 3133440 377 18446744073709551615 0"
	tests := []struct {
		name string
		line string
		want Stat
		err  string // a substring of the error; "" for none
	}{
		{name: "plain", line: "17740 (cat) R 17738 17730 7081" + mid + " 52981" + tail + "\n",
			want: Stat{PID: 17740, Comm: "cat", State: 'R', PPID: 17738, PGRP: 17730, Session: 7081, Start: 52981}},
		{name: "spaces and parens in the name", line: "5 (a) b (c) S 4 3 2" + mid + " 99" + tail,
			want: Stat{PID: 5, Comm: "a) b (c", State: 'S', PPID: 4, PGRP: 3, Session: 2, Start: 99}},
		{name: "name of parens", line: "5 ()) Z 1 70 70" + mid + " 99",
			want: Stat{PID: 5, Comm: ")", State: 'Z', PPID: 1, PGRP: 70, Session: 70, Start: 99}},
		{name: "name with a trailing space", line: "5 (pt worker (1) ) S 4 3 3" + mid + " 99",
			want: Stat{PID: 5, Comm: "pt worker (1) ", State: 'S', PPID: 4, PGRP: 3, Session: 3, Start: 99}},
		{name: "empty name", line: "5 () X 0 0 0" + mid + " 7\n",
			want: Stat{PID: 5, Comm: "", State: 'X', Start: 7}},
		{name: "negative tty and a kernel thread", line: "2 (kthreadd) S 0 0 0" + mid + " 0",
			want: Stat{PID: 2, Comm: "kthreadd", State: 'S'}},
		// A read cut short after the start time loses nothing needed.
		{name: "cut after the start time", line: "5 (x) S 4 3 3" + mid + " 99 31334",
			want: Stat{PID: 5, Comm: "x", State: 'S', PPID: 4, PGRP: 3, Session: 3, Start: 99}},
		{name: "cut before the start time", line: "5 (x) S 4 3 3" + mid, err: "21 fields, want at least 22"},
		{name: "truncated", line: "77 (sleep) S 1 70", err: "5 fields, want at least 22"},
		{name: "nothing after the name", line: "77 (sleep)", err: "2 fields"},
		{name: "cut in the name", line: "77 (slee", err: "no command name"},
		{name: "no name", line: "5 S 4 3 3" + mid + " 99", err: "no command name"},
		{name: "empty", line: "", err: "no command name"},
		{name: "no pid", line: "(x) S 4 3 3" + mid + " 99", err: "pid"},
		{name: "state not a letter", line: "5 (x) SS 4 3 3" + mid + " 99", err: "state"},
		{name: "garbage ppid", line: "5 (x) S four 3 3" + mid + " 99", err: "field 4"},
		{name: "garbage start", line: "5 (x) S 4 3 3" + mid + " -99", err: "field 22"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.line))
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("ParseStat error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("ParseStat = %+v, %v; want an error with %q", got, err, tt.err)
			}
			if got != tt.want {
				t.Errorf("ParseStat = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadStatSelf(t *testing.T) {
	me, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if me.PID != os.Getpid() || me.PPID != os.Getppid() || me.PGRP != syscall.Getpgrp() || me.Start == 0 || me.Dead() {
		t.Errorf("own entry = %+v, want pid %d ppid %d pgrp %d, a start time, alive",
			me, os.Getpid(), os.Getppid(), syscall.Getpgrp())
	}
	if sid, _ := unix.Getsid(0); me.Session != sid {
		t.Errorf("session = %d, want %d", me.Session, sid)
	}
}

func TestReadStatZombie(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Waited for without reaping: it stays a zombie until cmd.Wait.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		cmd.Wait()
		t.Skipf("waitid WNOWAIT: %v", err)
	}
	st, err := ReadStat(pid)
	cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Dead() || st.Comm != "true" || st.PPID != os.Getpid() {
		t.Errorf("exited child = %+v, want a dead \"true\" whose parent is %d", st, os.Getpid())
	}
}

func TestReadStatGone(t *testing.T) {
	_, err := ReadStat(1 << 30) // above pid_max
	if !errors.Is(err, fs.ErrNotExist) || !os.IsNotExist(err) {
		t.Errorf("ReadStat(no such pid) error = %v, want one that is fs.ErrNotExist", err)
	}
}

func TestPIDs(t *testing.T) {
	pids, err := PIDs()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, pid := range pids {
		found = found || pid == os.Getpid()
	}
	if !found {
		t.Errorf("PIDs() = %d pids, without this process %d", len(pids), os.Getpid())
	}
}

// BenchmarkReadStat is the cost of one process's entry, which the GPU
// sampler reads once a tick for every process NVML lists.
func BenchmarkReadStat(b *testing.B) {
	b.ReportAllocs()
	pid := os.Getpid()
	for b.Loop() {
		if _, err := ReadStat(pid); err != nil {
			b.Fatal(err)
		}
	}
}
