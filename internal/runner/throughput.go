package runner

import (
	"context"
	"fmt"

	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/termtext"
)

// Throughput measurements (--throughput): each size runs ThroughputSteps
// steps in a fresh trial, and the first ThroughputWarmup step intervals are
// left out.
const (
	ThroughputSteps  = 14
	ThroughputWarmup = 3
)

// measureThroughput measures samples/s at the answer and at the sizes
// below it that record.ThroughputSizes chooses, in fresh trials of their
// own (not the search's, whose sizes are an accident of the search and
// whose few steps are mostly warm-up), and recommends a size for speed only
// when it is faster than the answer beyond the measured noise.
func (s *session) measureThroughput(ctx context.Context, answer int) (*record.Throughput, error) {
	tp := &record.Throughput{Steps: ThroughputSteps, Warmup: ThroughputWarmup, Recommended: answer}
	sizes := append([]int{answer}, record.ThroughputSizes(answer, s.scfg.Min, s.scfg.MultipleOf)...)
	for _, size := range sizes {
		t, err := s.fresh.Measure(ctx, size, ThroughputSteps)
		if err != nil {
			return tp, err
		}
		m := record.SizeThroughput{Size: size, Trial: t.N}
		switch {
		case !t.Outcome.Fits():
			s.prog.Warn(fmt.Sprintf("--throughput: trial %d at %d did not run its %d steps (%s); its memory may still rise after --steps: try --soak",
				t.N, size, ThroughputSteps, termtext.Line(t.Reason, 100)))
		case !t.Busy:
			m.SamplesPerSecond, m.Noise, m.Intervals, _ = record.MeasureThroughput(size, t.StepTimes, ThroughputWarmup)
		}
		tp.Sizes = append(tp.Sizes, m)
		if err := ctx.Err(); err != nil {
			return tp, fmt.Errorf("throughput stopped: %w", err)
		}
	}
	if tp.Sizes[0].SamplesPerSecond == 0 {
		s.prog.Warn(fmt.Sprintf("--throughput: no samples/s at %d: the program reported too few steps (batchfit sees PyTorch optimizer steps and optax updates)", answer))
		return tp, nil
	}
	tp.Recommended, tp.Gain = record.RecommendSpeed(answer, tp.Sizes)
	return tp, nil
}
