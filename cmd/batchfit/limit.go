package main

import (
	"fmt"
	"strings"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/units"
)

// limit resolves --memory-limit against the first GPU: the limit in bytes
// and the allocator fraction that gives torch that limit.
func (o *searchOptions) limit(devices []gpu.Device) (uint64, float64, error) {
	if o.memoryLimit == "" {
		return 0, 0, nil
	}
	hint := "give --memory-limit as a size (24GiB, 40GB, 512MiB) or a share of the GPU (80%)"
	bytes, percent, err := units.ParseSize(o.memoryLimit)
	if err != nil {
		return 0, 0, usageError(hint, "--memory-limit %q: %v", o.memoryLimit, err)
	}
	if len(devices) == 0 {
		return 0, 0, usageError("--memory-limit needs the GPU's total memory, read through the NVIDIA driver; run where the driver is installed", "--memory-limit: no GPU found")
	}
	total := devices[0].Total
	if percent > 0 {
		bytes = uint64(float64(total) * percent / 100)
	}
	if bytes == 0 {
		return 0, 0, usageError(hint, "--memory-limit must be more than zero")
	}
	if bytes > total {
		return 0, 0, usageError(fmt.Sprintf("%s has %s; choose a smaller limit", devices[0].Name, units.Bytes(total)), "--memory-limit %s is more than the GPU's memory", units.Bytes(bytes))
	}
	return bytes, float64(bytes) / float64(total), nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
