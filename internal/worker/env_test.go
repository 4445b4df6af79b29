package worker

import (
	"slices"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
)

func TestEnviron(t *testing.T) {
	for _, tc := range []struct {
		name         string
		base         []string
		limit, total uint64
		want         []string
	}{
		{"no cap", []string{"A=1", "BATCHFIT_REPORT=/x", "PYTHONPATH=/user"}, 0, 80 << 30,
			[]string{"A=1", "PYTHONPATH=/pkg:/user"}},
		{"cap merged with the user's options", []string{"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "A=1"}, 20 << 30, 80 << 30,
			[]string{"A=1", "PYTHONPATH=/pkg", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,per_process_memory_fraction:0.25"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Environ(tc.base, "/pkg", adapter.Torch{}, tc.limit, tc.total); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
