package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// proc is what the sampler needs to know about a live process to find a
// trial's process tree.
type proc struct {
	ppid  int
	pgid  int
	start uint64 // start time in clock ticks since boot; tells a reused PID apart
}

// statFunc reads one process's entry; the sampler holds one so that tests
// can fake a process tree.
type statFunc func(pid int) (proc, error)

// readStat reads /proc/PID/stat. A trial's tree is found by reading upward
// from the few PIDs that NVML lists, not by walking all of /proc: on a busy
// node that walk costs milliseconds, 40 times a second.
func readStat(pid int) (proc, error) {
	var buf [1024]byte
	line, err := readSmall("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
	if err != nil {
		return proc{}, err
	}
	return parseStat(line)
}

// readSmall reads a file of at most len(buf) bytes into buf, which the
// caller can keep on its stack: stat files are read on every tick.
func readSmall(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return buf[:n], nil
}

// parseStat reads ppid, pgrp and starttime from a /proc/PID/stat line. The
// command name may hold spaces and parentheses, so fields are counted from
// the last ')'.
func parseStat(line []byte) (proc, error) {
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return proc{}, errors.New("parse stat: no command name")
	}
	// After ") ": state(3) ppid(4) pgrp(5) ... starttime(22), 1-based as in proc(5).
	f := bytes.Fields(line[i+1:])
	if len(f) < 20 {
		return proc{}, fmt.Errorf("parse stat: %d fields after the command name", len(f))
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return proc{}, fmt.Errorf("parse stat: %w", err)
	}
	return proc{ppid: ppid, pgid: pgid, start: start}, nil
}
