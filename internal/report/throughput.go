package report

import (
	"fmt"
	"strings"

	"github.com/batchfit/batchfit/internal/record"
)

// ThroughputText is --throughput's part of the summary: what was measured,
// then the recommendation, or that nothing below the answer is measurably
// faster.
func ThroughputText(answer int, tp *record.Throughput) string {
	var b strings.Builder
	var cells []string
	for _, m := range tp.Sizes {
		if m.SamplesPerSecond > 0 {
			cells = append(cells, fmt.Sprintf("%d: %.0f/s ±%.1f %%", m.Size, m.SamplesPerSecond, 100*m.Noise))
		} else {
			cells = append(cells, fmt.Sprintf("%d: not measured", m.Size))
		}
	}
	fmt.Fprintf(&b, "  samples/s (--throughput, %d steps after %d warm-up): %s\n", tp.Steps-tp.Warmup-1, tp.Warmup, strings.Join(cells, ", "))
	switch {
	case len(tp.Sizes) == 0 || tp.Sizes[0].SamplesPerSecond == 0:
		fmt.Fprintf(&b, "  fastest: not measured at %d\n", answer)
	case tp.Recommended != answer:
		fmt.Fprintf(&b, "  fastest: %d, %.1f %% more samples/s than %d (beyond the measured noise)\n", tp.Recommended, 100*tp.Gain, answer)
	default:
		fmt.Fprintf(&b, "  fastest: %d; no measurable gain below it\n", answer)
	}
	return b.String()
}
