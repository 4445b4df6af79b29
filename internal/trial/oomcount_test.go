package trial

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestHostOOMCounter(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  uint64
		ok    bool
	}{
		{
			name: "cgroup v2",
			files: map[string]string{
				"proc/self/cgroup": "0::/user.slice/user-1000.slice/session-3.scope\n",
				"sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope/memory.events": "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n",
				"proc/vmstat": "nr_free_pages 100\noom_kill 40\n",
			},
			want: 2, ok: true,
		},
		{
			name: "cgroup v2 in a container's namespace",
			files: map[string]string{
				"proc/self/cgroup":            "0::/\n",
				"sys/fs/cgroup/memory.events": "oom 1\noom_kill 1\n",
				"proc/vmstat":                 "oom_kill 40\n",
			},
			want: 1, ok: true,
		},
		{
			name: "cgroup v1, hybrid",
			files: map[string]string{
				"proc/self/cgroup": "9:name=systemd:/\n4:memory:/process_api/d3ec06\n3:cpuset:/\n0::/\n",
				"sys/fs/cgroup/memory/process_api/d3ec06/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n",
			},
			want: 7, ok: true,
		},
		{
			name: "cgroup v1 path not visible, mount root is",
			files: map[string]string{
				"proc/self/cgroup":                        "11:memory,hugetlb:/docker/abc\n",
				"sys/fs/cgroup/memory/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n",
			},
			want: 5, ok: true,
		},
		{
			name: "no cgroup counter: the kernel's",
			files: map[string]string{
				"proc/self/cgroup": "0::/\n",
				"proc/vmstat":      "pgfault 1\noom_kill 40\n",
			},
			want: 40, ok: true,
		},
		{
			name:  "nothing to read",
			files: map[string]string{},
			ok:    false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			n, ok := hostOOMCounter{root: root}.OOMKills()
			if n != tt.want || ok != tt.ok {
				t.Fatalf("OOMKills = %d, %v; want %d, %v", n, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestHostOOMCounterOnThisMachine reads the real counter and checks it
// against the one this test finds on its own: the memory cgroup this
// process is in, located through /proc/self/mountinfo instead of the fixed
// mount paths hostOOMCounter tries, or else the kernel's count in
// /proc/vmstat. The counts only grow, so the counter's answer must lie
// between two readings of that file taken around it.
func TestHostOOMCounterOnThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("OOM kill counts are read from Linux's cgroup and /proc files")
	}
	source := ownCgroupOOMFile(t)
	if source == "" {
		source = "/proc/vmstat"
	}
	before, ok := oomKillsIn(source)
	if !ok {
		t.Skip("this machine has neither a memory cgroup with an oom_kill count nor an oom_kill line in /proc/vmstat")
	}
	n, ok := hostOOMCounter{root: "/"}.OOMKills()
	after, _ := oomKillsIn(source)
	t.Logf("oom_kill = %d (ok %v); %s says %d", n, ok, source, after)
	if !ok {
		t.Fatalf("OOMKills found no counter, but %s has one", source)
	}
	if n < before || n > after {
		t.Errorf("OOMKills = %d, but %s went from %d to %d around it", n, source, before, after)
	}
	// Counts are often 0 everywhere, so check also that the count comes
	// from the file found here, not from another that agrees by chance.
	read := "/proc/vmstat"
	for _, f := range (hostOOMCounter{root: "/"}).cgroupFiles() {
		if _, ok := oomKillsIn(f); ok {
			read = f
			break
		}
	}
	if !sameFile(read, source) {
		t.Errorf("OOMKills reads %s, want %s", read, source)
	}
	// Every OOM kill in a cgroup is also one of the machine's.
	if all, ok := oomKillsIn("/proc/vmstat"); ok && n > all {
		t.Errorf("OOMKills = %d, more than the machine's %d in /proc/vmstat", n, all)
	}
}

// ownCgroupOOMFile returns the file in which the kernel counts the OOM kills
// of this process's memory cgroup (memory.events on cgroup v2,
// memory.oom_control on v1), or "" when there is none with a count.
func ownCgroupOOMFile(t *testing.T) string {
	t.Helper()
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	var v2, v1 string
	hasV2, hasV1 := false, false
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2, hasV2 = parts[2], true
		} else if slices.Contains(strings.Split(parts[1], ","), "memory") {
			v1, hasV1 = parts[2], true
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatalf("read mounts: %v", err)
	}
	var found []string // v2 first, as the kernel binds memory to one hierarchy
	for _, line := range strings.Split(string(mounts), "\n") {
		// ID parent dev root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		root, mountpoint, fstype := f[3], f[4], g[0]
		switch {
		case fstype == "cgroup2" && hasV2:
			if rel, ok := under(v2, root); ok {
				found = slices.Insert(found, 0, filepath.Join(mountpoint, rel, "memory.events"))
			}
		case fstype == "cgroup" && hasV1 && slices.Contains(strings.Split(g[2], ","), "memory"):
			if rel, ok := under(v1, root); ok {
				found = append(found, filepath.Join(mountpoint, rel, "memory.oom_control"))
			}
		}
	}
	for _, f := range found {
		if _, ok := oomKillsIn(f); ok {
			return f
		}
	}
	return ""
}

// under returns cgroup's path below a mount of its hierarchy whose root is
// root, or false when the mount does not show it.
func under(cgroup, root string) (string, bool) {
	if root == "/" {
		return cgroup, true
	}
	if cgroup == root || strings.HasPrefix(cgroup, root+"/") {
		return strings.TrimPrefix(cgroup, root), true
	}
	return "", false
}

// oomKillsIn reads the "oom_kill N" line of path.
func oomKillsIn(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func sameFile(a, b string) bool {
	fa, erra := os.Stat(a)
	fb, errb := os.Stat(b)
	return erra == nil && errb == nil && os.SameFile(fa, fb)
}
