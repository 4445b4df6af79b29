package search

import (
	"context"
	"math/rand/v2"
	"testing"
)

// TestExactWhenModelIsWrong: the model only decides where to look. When its
// assumptions fail (an overhead far from the expected 0.3–0.6 GiB, memory
// that grows faster than linearly, no allocated figure, no figure at all)
// the answer must still be exact; the trial counts are logged.
func TestExactWhenModelIsWrong(t *testing.T) {
	tests := []struct {
		name  string
		alter func(w *workload, p *fakeProber)
	}{
		{"no hidden overhead", func(w *workload, _ *fakeProber) { w.ctx = 0 }},
		{"overhead 1 GiB", func(w *workload, _ *fakeProber) { w.ctx = 1 * gib }},
		{"overhead 3 GiB", func(w *workload, _ *fakeProber) { w.ctx = 3 * gib }},
		{"NVML figure only", func(_ *workload, p *fakeProber) { p.only = func(m Memory) Memory { return Memory{Device: m.Device} } }},
		{"no memory figures", func(_ *workload, p *fakeProber) { p.only = func(Memory) Memory { return Memory{} } }},
		{"quadratic memory", func(w *workload, _ *fakeProber) { w.quadratic = w.perSample / 64 }},
		{"tiny fixed cost", func(w *workload, _ *fakeProber) { w.fixed = 64 * mib }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []int{1, 3} {
				r := rand.New(rand.NewPCG(99, 1))
				trials := 0
				for range 100 {
					w := randomWorkload(r)
					p := &fakeProber{}
					tt.alter(&w, p)
					p.w = w
					cfg := Config{Min: 1, Max: 4096, Parallel: k, Capacity: w.capacity}
					res, err := Run(context.Background(), cfg, p)
					if err != nil {
						t.Fatalf("%+v: %v", w, err)
					}
					checkProof(t, res, cfg, w.truth(cfg))
					trials += len(res.Trials)
				}
				t.Logf("k=%d: %.2f trials on average", k, float64(trials)/100)
			}
		})
	}
}
