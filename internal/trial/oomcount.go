package trial

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OOMCounter reads a running count of processes killed by the kernel's OOM
// killer. ok is false when there is no counter to read; that is "no
// evidence", never an error.
type OOMCounter interface {
	OOMKills() (count uint64, ok bool)
}

// hostOOMCounter reads the oom_kill count of batchfit's own cgroup: the
// trial's processes are in it, and since Linux 4.19 it counts every OOM
// kill of its processes, the machine-wide OOM killer's included. Without a
// readable cgroup it falls back to the kernel's machine-wide count, which
// also counts other users' processes. root is "/" except in tests.
type hostOOMCounter struct {
	root string
}

var _ OOMCounter = hostOOMCounter{}

func (c hostOOMCounter) OOMKills() (uint64, bool) {
	for _, f := range c.cgroupFiles() {
		if n, ok := readKey(f, "oom_kill"); ok {
			return n, true
		}
	}
	return readKey(c.path("proc/vmstat"), "oom_kill")
}

// cgroupFiles lists the files that may hold the count, best first: cgroup
// v2 memory.events, then cgroup v1 memory.oom_control. Each is tried at
// the path /proc/self/cgroup names and at the mount's root, which is where
// the cgroup is when batchfit runs in a container with its own cgroup
// namespace view.
func (c hostOOMCounter) cgroupFiles() []string {
	b, err := os.ReadFile(c.path("proc/self/cgroup"))
	if err != nil {
		return nil
	}
	var v2, v1 []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		id, controllers, cg := parts[0], parts[1], parts[2]
		if id == "0" && controllers == "" {
			for _, mount := range []string{"sys/fs/cgroup", "sys/fs/cgroup/unified"} {
				v2 = append(v2,
					c.path(filepath.Join(mount, cg, "memory.events")),
					c.path(filepath.Join(mount, "memory.events")))
			}
			continue
		}
		for _, ctl := range strings.Split(controllers, ",") {
			if ctl == "memory" {
				v1 = append(v1,
					c.path(filepath.Join("sys/fs/cgroup/memory", cg, "memory.oom_control")),
					c.path(filepath.Join("sys/fs/cgroup/memory", "memory.oom_control")))
			}
		}
	}
	return append(v2, v1...)
}

func (c hostOOMCounter) path(rel string) string {
	return filepath.Join(c.root, rel)
}

// readKey reads the value of key from a file of "key value" lines.
func readKey(path, key string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == key {
			n, err := strconv.ParseUint(f[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
