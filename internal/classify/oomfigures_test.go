package classify

import (
	"os"
	"path/filepath"
	"testing"
)

// TestParseOOMFigures reads the figures of real OOM messages: what failed,
// what PyTorch had allocated and reserved, the cap under a memory fraction.
func TestParseOOMFigures(t *testing.T) {
	const (
		KiB = 1 << 10
		MiB = 1 << 20
		GiB = 1 << 30
	)
	gib := func(v float64) uint64 { return uint64(v*GiB + 0.5) }
	mib := func(v float64) uint64 { return uint64(v*MiB + 0.5) }
	tests := []struct {
		file string
		want OOMFigures
	}{
		{"oom-torch-1.0-cached.txt", OOMFigures{Tried: 32 * MiB, Capacity: gib(7.79), Free: 21 * MiB,
			Allocated: gib(6.64), Reserved: gib(6.64) + mib(150.86)}},
		{"oom-torch-1.8.txt", OOMFigures{Tried: 20 * MiB, Capacity: gib(5.80), Free: mib(6.69), Allocated: gib(4.36), Reserved: gib(4.63)}},
		{"oom-torch-1.13.txt", OOMFigures{Tried: 74 * MiB, Capacity: gib(11.91), Free: mib(12.94), Allocated: gib(10.79), Reserved: gib(11.21)}},
		{"oom-torch-2.4.txt", OOMFigures{Tried: gib(22.78), Capacity: gib(31.47), Free: gib(12.73), Allocated: gib(9.08), Reserved: gib(9.08) + gib(9.35), Process: gib(18.73)}},
		{"oom-torch-2.11-fraction.txt", OOMFigures{Tried: 2 * GiB, Capacity: gib(139.80), Free: gib(133.19), Allowed: gib(6.99),
			Allocated: gib(6.03), Reserved: gib(6.03) + 768*KiB, Process: gib(6.61)}},
		{"oom-torch-2.11-h200.txt", OOMFigures{Tried: 200 * GiB, Capacity: gib(139.80), Free: gib(139.29), Process: 518 * MiB}},
		{"oom-torchrun-rank.txt", OOMFigures{Tried: 8 * GiB, Capacity: gib(79.10), Free: gib(5.12), Allocated: gib(70.01), Reserved: gib(70.01) + gib(2.44), Process: gib(73.97)}},
		{"oom-jax-xla.txt", OOMFigures{Tried: 4770354232}},
		{"oom-jax-0.11-h200.txt", OOMFigures{Tried: 200 * GiB}},
		// XLA's BFC allocator's state before the error: a 23.90 GiB pool
		// (XLA_PYTHON_CLIENT_MEM_FRACTION) with 268.26 MiB in use.
		{"oom-jax-bfc-stats-h200.txt", OOMFigures{Tried: gib(24.29), Allowed: gib(23.90), Allocated: mib(268.26), Reserved: mib(268.26)}},
		{"oom-cuda-error.txt", OOMFigures{}},
		{"crash-keyerror.txt", OOMFigures{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", "corpus", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := ParseOOMFigures(out); got != tt.want {
				t.Errorf("ParseOOMFigures =\n %+v, want\n %+v", got, tt.want)
			}
		})
	}
}
