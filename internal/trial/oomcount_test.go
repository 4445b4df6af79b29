package trial

import (
	"os"
	"path/filepath"
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

// TestHostOOMCounterOnThisMachine only checks that reading the real files
// works or reports "no counter"; the count itself is the machine's.
func TestHostOOMCounterOnThisMachine(t *testing.T) {
	n, ok := hostOOMCounter{root: "/"}.OOMKills()
	t.Logf("oom_kill = %d (ok %v)", n, ok)
}
