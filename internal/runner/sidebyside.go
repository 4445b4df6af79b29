package runner

import (
	"slices"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/probe"
)

// maxPerGPU is the most capped trials run side by side on one GPU: three
// hold the proof's pair and the step that names it (search.Config.
// ProofAlongside); more would share the GPU's compute for little.
const maxPerGPU = 3

// placeSideBySide gives each GPU of pcfg's slots as many slots as it has
// room for capped trials (cappedPerGPU) and returns that number. A memory
// limit that leaves a GPU room for two capped processes runs trials side by
// side on it, each held to the limit by its own cap (and, for the whole
// process, its own NVML peak), so none changes another's outcome. What a
// user waits for is rounds, not trials: every round of the search plans a
// size a slot (Parallel), the proof's re-check runs its pair at once, and
// with room for three a round that leaves a slot free carries the proof's
// re-checks (search.Config.ProofAlongside). Only for fresh trials that run
// here: a warm worker places its own (newProber), and a cluster picks the
// GPUs.
func (s *session) placeSideBySide(pcfg *probe.Config) int {
	n := s.cappedPerGPU(pcfg.Slots)
	if s.cfg.Worker != nil || n < 2 {
		return 1
	}
	sets := pcfg.Slots
	if len(sets) == 0 {
		sets = [][]int{nil} // not pinned: whatever GPU CUDA picks
	}
	pcfg.Slots = interleave(sets, n)
	s.scfg.SideBySide, s.scfg.ProofAlongside = len(pcfg.Slots), n >= 3
	s.scfg.Parallel = len(pcfg.Slots)
	return n
}

// cappedPerGPU is how many trials capped at --memory-limit each GPU of the
// slots has room for (the limit and contextHeadroom each) beside what other
// processes hold there, at most maxPerGPU: 1 without a limit, and 1 for a
// program no framework of batchfit's caps (--framework none), which only
// its peak judges afterwards: while it runs it could take a neighbour's
// memory and fail it. The GPU with the least room decides; unpinned trials
// run on whatever GPU CUDA picks, the first.
func (s *session) cappedPerGPU(slots [][]int) int {
	if s.limit == 0 || s.cfg.Framework == nil || s.cfg.Framework.Name() == adapter.FrameworkNone {
		return 1
	}
	devices := s.cfg.Group.Devices
	if len(slots) == 0 && len(devices) > 0 {
		devices = devices[:1]
	}
	room, known := uint64(0), false
	for _, d := range devices {
		if len(slots) > 0 && !slices.ContainsFunc(slots, func(slot []int) bool { return slices.Contains(slot, d.Index) }) {
			continue
		}
		free := d.Total - min(s.held[d.Index], d.Total)
		if !known || free < room {
			room, known = free, true
		}
	}
	return int(min(maxPerGPU, max(room/(s.limit+contextHeadroom), 1)))
}

// interleave returns n slots for each GPU set, in turns ([g0, g1, g0, g1,
// ...]): the prober hands out slots in order, so a round's sizes spread over
// the GPUs, one a GPU, before a second trial shares one.
func interleave(sets [][]int, n int) [][]int {
	var slots [][]int
	for range n {
		slots = append(slots, sets...)
	}
	return slots
}
