package sim

import (
	"fmt"
	"math"
	"math/rand"
	"time"
)

// RandomWorkload draws a varied workload for tests and benchmarks: per-sample
// memory log-uniform from 1 MiB to 2 GiB, fixed memory log-uniform from
// 0.1 GiB to 20 GiB, a 0.3–0.6 GiB context, allocator rounding off, 2 MiB or
// 20 MiB, noise off or up to half the per-sample size, and no faults.
//
// Batch size 1 always fits on a whole card of 25 GiB or more (an H100): the
// most a size-1 trial can use is under 24.6 GiB. On a smaller card, or under
// a memory limit, it may not, so tests that want the "nothing fits" case use
// a small card or a low limit fraction with these workloads.
func RandomWorkload(rng *rand.Rand) Workload {
	logUniform := func(lo, hi float64) float64 {
		return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
	}
	w := Workload{
		Context:   300*MiB + uint64(rng.Int63n(int64(300*MiB))),
		Fixed:     uint64(logUniform(0.1*float64(GiB), 20*float64(GiB))),
		PerSample: uint64(logUniform(float64(MiB), 2*float64(GiB))),
		Seed:      rng.Int63(),
		StepSleep: 5 * time.Millisecond,
	}
	switch rng.Intn(3) {
	case 1:
		w.Round = 2 * MiB
	case 2:
		w.Round = 20 * MiB
	}
	if rng.Intn(2) == 1 {
		w.Noise = 1 + uint64(rng.Int63n(int64(w.PerSample/2)))
	}
	// Bigger samples take longer; keep the law in a plausible range.
	w.PerSampleTime = time.Duration(float64(w.PerSample)/float64(MiB)*8) * time.Microsecond
	if w.PerSampleTime < time.Microsecond {
		w.PerSampleTime = time.Microsecond
	}
	w.StepOverhead = time.Duration(5+rng.Intn(46)) * time.Millisecond
	w.SaturateAt = 1 << (3 + rng.Intn(7)) // 8 … 512
	w.Name = fmt.Sprintf("random-%dmib", w.PerSample/MiB)
	return w
}
