package probe

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// sharing tells which trials of one Probe call ran side by side on the same
// GPUs: their step times share the GPU's compute and say nothing of one
// trial's speed (record.Trial.SharedGPU). Slots may name a GPU set more than
// once (several capped trials on each GPU, interleaved over the GPUs), and a
// round may run fewer trials than slots, or more, so only what ran at the
// same time tells.
type sharing struct {
	mu      sync.Mutex
	running map[string][]*atomic.Bool // per GPU set, the flags of its running trials
}

// start notes a trial starting on gpus and returns its flag, set once
// another trial runs on the same GPUs while it runs, and the function to
// call when it ends. A nil sharing (a soak, a measurement: one trial alone)
// returns a flag that stays unset.
func (s *sharing) start(gpus []int) (shared *atomic.Bool, end func()) {
	shared = new(atomic.Bool)
	if s == nil {
		return shared, func() {}
	}
	// nil (not pinned: whatever GPU CUDA picks) is a set of its own.
	key := fmt.Sprint(gpus)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		s.running = map[string][]*atomic.Bool{}
	}
	others := s.running[key]
	for _, o := range others {
		o.Store(true)
	}
	shared.Store(len(others) > 0)
	s.running[key] = append(others, shared)
	return shared, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		flags := s.running[key]
		for i, f := range flags {
			if f == shared {
				s.running[key] = append(flags[:i:i], flags[i+1:]...)
				break
			}
		}
	}
}
