package runner

import "slices"

// maxPerGPU is the most capped trials run side by side on one GPU: three
// hold the proof's pair and the step that names it (search.Config.
// ProofAlongside); more would share the GPU's compute for little.
const maxPerGPU = 3

// cappedPerGPU is how many trials capped at --memory-limit each GPU of the
// slots has room for (the limit and contextHeadroom each), at most
// maxPerGPU: 1 without a limit. The smallest of the slots' GPUs decides;
// unpinned trials run on whatever GPU CUDA picks, the first.
func (s *session) cappedPerGPU(slots [][]int) int {
	total := s.total
	if len(slots) > 0 {
		total = 0
		for _, d := range s.cfg.Group.Devices {
			if slices.ContainsFunc(slots, func(slot []int) bool { return slices.Contains(slot, d.Index) }) && (total == 0 || d.Total < total) {
				total = d.Total
			}
		}
	}
	if s.limit == 0 || total == 0 {
		return 1
	}
	return int(min(maxPerGPU, total/(s.limit+contextHeadroom)))
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
