package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/record"
)

func TestWriteHistory(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHistory(&b, nil); err != nil || b.String() != "no runs yet\n" {
		t.Errorf("no runs: %q, %v", b.String(), err)
	}
	started := time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local)
	runs := []record.Run{
		{
			ID: "1m8pz", Started: started, Status: record.Found, Answer: 96, Cached: true,
			Trials: make([]record.Trial, 5), Command: []string{"python", "train.py", "--batch-size", "{}"},
			GPU:      &record.GPUInfo{Devices: []gpu.Device{{Name: "NVIDIA L4"}}},
			Settings: record.Settings{MemoryLimit: 16 << 30},
		},
		{ID: "1m8q0", Started: started, Status: record.NothingFits, Command: []string{"./train.sh"}},
	}
	b.Reset()
	if err := WriteHistory(&b, runs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "RUN ") {
		t.Fatalf("want a header and two rows:\n%s", b.String())
	}
	for i, want := range [][]string{
		{"1m8pz", "2026-03-01 12:00", "found (cached)", "96", "5", "NVIDIA L4 @16.00 GiB", "python train.py --batch-size {}"},
		{"1m8q0", "nothing_fits", "-", "0", "-", "./train.sh"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("row %d lacks %q: %q", i+1, w, lines[i+1])
			}
		}
	}
}
