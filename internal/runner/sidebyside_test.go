package runner

import (
	"context"
	"reflect"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/gpugroup"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/record"
)

// Under a memory limit that leaves room, each GPU runs up to three capped
// trials side by side: one GPU as before, and with --gpus each GPU of the
// list, its slots interleaved so that a round's sizes spread over the
// GPUs first. The GPU with the least room (the smallest, or the one others
// hold most of) decides how many; every round of the search plans a size
// a slot (Parallel), and the proof's re-checks may use every slot.
func TestSideBySideSlots(t *testing.T) {
	h200 := func(i int) gpu.Device { return gpu.Device{Index: i, Name: "H200", Total: 141 * gib} }
	small := gpu.Device{Index: 1, Name: "H200", Total: 48 * gib}
	local := func(gpugroup.Group) (probe.Executor, error) { return nil, nil }
	remote := func(gpugroup.Group) (probe.Executor, error) { return &fakeExecutor{}, nil }
	for _, tc := range []struct {
		name       string
		framework  adapter.Framework // nil: torch
		devices    []gpu.Device
		slots      [][]int
		limit      uint64
		held       map[int]uint64 // by others, before the search
		executor   func(gpugroup.Group) (probe.Executor, error)
		want       [][]int
		sideBySide int
		alongside  bool
	}{
		{"one GPU, room for three", nil, []gpu.Device{{Index: 0, Total: 80 * gib}}, nil, 24 * gib, nil, local,
			[][]int{nil, nil, nil}, 3, true},
		{"one GPU, room for two", nil, []gpu.Device{{Index: 0, Total: 80 * gib}}, nil, 30 * gib, nil, local,
			[][]int{nil, nil}, 2, false},
		{"--gpus 1", nil, []gpu.Device{h200(1)}, [][]int{{1}}, 24 * gib, nil, local,
			[][]int{{1}, {1}, {1}}, 3, true},
		{"two GPUs, three each, interleaved", nil, []gpu.Device{h200(0), h200(1)}, [][]int{{0}, {1}}, 24 * gib, nil, local,
			[][]int{{0}, {1}, {0}, {1}, {0}, {1}}, 6, true},
		{"the smaller GPU decides", nil, []gpu.Device{h200(0), small}, [][]int{{0}, {1}}, 20 * gib, nil, local,
			[][]int{{0}, {1}, {0}, {1}}, 4, false},
		{"two GPUs a trial", nil, []gpu.Device{h200(0), h200(1), h200(2), h200(3)}, [][]int{{0, 1}, {2, 3}}, 24 * gib, nil, local,
			[][]int{{0, 1}, {2, 3}, {0, 1}, {2, 3}, {0, 1}, {2, 3}}, 6, true},
		{"others hold 70 GiB of GPU 1", nil, []gpu.Device{h200(0), h200(1)}, [][]int{{0}, {1}}, 24 * gib, map[int]uint64{1: 70 * gib}, local,
			[][]int{{0}, {1}, {0}, {1}}, 4, false},
		{"no limit", nil, []gpu.Device{h200(0), h200(1)}, [][]int{{0}, {1}}, 0, nil, local,
			[][]int{{0}, {1}}, 0, false},
		{"a limit without room", nil, []gpu.Device{h200(0), h200(1)}, [][]int{{0}, {1}}, 100 * gib, nil, local,
			[][]int{{0}, {1}}, 0, false},
		{"Slurm picks the GPUs", nil, []gpu.Device{{Name: "h100"}}, make([][]int, 4), 24 * gib, nil, remote,
			make([][]int, 4), 0, false},
		// Nothing caps a trial of --framework none while it runs.
		{"no framework to cap the trials", adapter.None{}, []gpu.Device{h200(0)}, nil, 24 * gib, nil, local,
			nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(plain)
			f.cfg.Framework = tc.framework
			if tc.framework == nil {
				f.cfg.Framework = adapter.Torch{}
			}
			f.cfg.Group = gpugroup.Group{Name: "H200", Devices: tc.devices, Slots: tc.slots}
			d := f.deps()
			d.Executor = tc.executor
			s := &session{cfg: f.cfg, deps: d, limit: tc.limit, held: tc.held, total: tc.devices[0].Total, run: &record.Run{LogDir: t.TempDir()}}
			pcfg, err := s.probeConfig(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if pcfg.Sampler != nil { // as begin does, for trials that run here
				s.placeSideBySide(&pcfg)
			}
			if !reflect.DeepEqual(pcfg.Slots, tc.want) || s.scfg.SideBySide != tc.sideBySide || s.scfg.ProofAlongside != tc.alongside {
				t.Errorf("slots %v, side by side %d, proof alongside %v; want %v, %d, %v",
					pcfg.Slots, s.scfg.SideBySide, s.scfg.ProofAlongside, tc.want, tc.sideBySide, tc.alongside)
			}
			if tc.sideBySide > 0 && s.scfg.Parallel != tc.sideBySide {
				t.Errorf("the search plans %d sizes a round, want one a slot, %d", s.scfg.Parallel, tc.sideBySide)
			}
		})
	}
}
