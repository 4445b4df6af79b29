package report

import (
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/record"
)

// The summary says what XLA's pool is on the named card and why, and what
// a larger share would allow by the memory model.
func TestPoolText(t *testing.T) {
	run := &record.Run{
		Answer:   500,
		Settings: record.Settings{MemoryLimit: 24 << 30},
		Pool:     &record.Pool{Framework: "jax", Bytes: 18 << 30, Share: 0.75, Source: "jaxlib's default"},
		Model:    &record.Model{Figure: "allocated", Intercept: 1 << 30, Slope: 34 << 20},
	}
	got := PoolText(run)
	want := "pool: JAX's on a 24.00 GiB card, 18.00 GiB (75 %, jaxlib's default); XLA_PYTHON_CLIENT_MEM_FRACTION=0.9 would allow about 620 (the memory model)"
	if got != want {
		t.Errorf("PoolText =\n %q\nwant\n %q", got, want)
	}
	run.Pool = &record.Pool{Framework: "jax", Bytes: 22 << 30, Share: 0.95, Source: "XLA_PYTHON_CLIENT_MEM_FRACTION=.95"}
	if got := PoolText(run); strings.Contains(got, "would allow") {
		t.Errorf("a pool above the hint's share still offers it: %q", got)
	}
	run.Pool = nil
	if got := PoolText(run); got != "" {
		t.Errorf("no pool: %q", got)
	}
}
