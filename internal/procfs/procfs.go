// Package procfs reads processes from Linux's /proc. Every reader of
// /proc/PID/stat goes through ParseStat: the command name in that file may
// hold spaces and parentheses, which a quick split gets wrong.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Stat is what batchfit uses of /proc/PID/stat (proc(5)).
type Stat struct {
	PID     int
	Comm    string // command name, without the parentheses
	State   byte   // R, S, D, Z (zombie), X (dead), ...
	PPID    int
	PGRP    int // process group
	Session int
	// Start is the start time in clock ticks after boot. A pid is reused
	// once its process is reaped; pid and start time together name one
	// process.
	Start uint64
}

// Dead reports whether the process has exited: a zombie waiting to be
// reaped, or one on its way out.
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' }

// statFields is how many fields ParseStat needs: up to the start time,
// field 22 in proc(5).
const statFields = 22

// ParseStat parses the contents of a /proc/PID/stat file. The command name
// (field 2) is in parentheses and may itself hold spaces and parentheses,
// so the name ends at the last ')'. Fields after the start time are not
// read, so a read cut short after it is fine.
func ParseStat(b []byte) (Stat, error) {
	st, err := parseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("parse stat: %w", err)
	}
	return st, nil
}

func parseStat(b []byte) (Stat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, errors.New("no command name in parentheses")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("pid: %w", err)
	}
	st := Stat{PID: pid, Comm: string(b[open+1 : end])}
	rest := b[end+1:]
	for n := 3; n <= statFields; n++ {
		// Split as bytes.Fields would, without allocating.
		rest = bytes.TrimLeft(rest, space)
		i := bytes.IndexAny(rest, space)
		if i < 0 {
			i = len(rest)
		}
		f := rest[:i]
		rest = rest[i:]
		if len(f) == 0 {
			return Stat{}, fmt.Errorf("%d fields, want at least %d", n-1, statFields)
		}
		var err error
		switch n {
		case 3:
			if len(f) != 1 {
				return Stat{}, fmt.Errorf("state %q is not one letter", string(f))
			}
			st.State = f[0]
		case 4:
			st.PPID, err = strconv.Atoi(string(f))
		case 5:
			st.PGRP, err = strconv.Atoi(string(f))
		case 6:
			st.Session, err = strconv.Atoi(string(f))
		case 22:
			st.Start, err = strconv.ParseUint(string(f), 10, 64)
		}
		if err != nil {
			return Stat{}, fmt.Errorf("field %d: %w", n, err)
		}
	}
	return st, nil
}

const space = " \t\n"

// ReadStat reads /proc/PID/stat. The GPU sampler calls it for a few
// processes 40 times a second, so it reads into a buffer on the stack and
// without an os.File. An error opening or reading the file is an
// *fs.PathError: errors.Is(err, fs.ErrNotExist) once the process is gone.
func ReadStat(pid int) (Stat, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	// The fields up to the start time take a few hundred bytes at most.
	var buf [1024]byte
	b, err := readSmall(path, buf[:])
	if err != nil {
		return Stat{}, err
	}
	st, err := parseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return st, nil
}

// Name is pid's command name (/proc/PID/comm, as stat holds it), or "?"
// when it cannot be read: gone, or in another PID namespace.
func Name(pid int) string {
	st, err := ReadStat(pid)
	if err != nil || st.Comm == "" {
		return "?"
	}
	return st.Comm
}

// readSmall reads up to len(buf) bytes of the file at path.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], nil
}

// PIDs lists the processes on the machine (those in this pid namespace).
func PIDs() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	// On an error, the names read so far are still worth returning.
	names, err := d.Readdirnames(-1)
	out := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, err
}
