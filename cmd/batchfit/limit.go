package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/report"
)

// limit resolves --memory-limit against the first GPU: the limit in bytes
// and the allocator fraction that gives torch that limit.
func (o *searchOptions) limit(devices []gpu.Device) (uint64, float64, error) {
	if o.memoryLimit == "" {
		return 0, 0, nil
	}
	hint := "give --memory-limit as a size (24GiB, 40GB, 512MiB) or a share of the GPU (80%)"
	bytes, percent, err := parseSize(o.memoryLimit)
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
		return 0, 0, usageError(fmt.Sprintf("%s has %s; choose a smaller limit", devices[0].Name, report.Bytes(total)), "--memory-limit %s is more than the GPU's memory", report.Bytes(bytes))
	}
	return bytes, float64(bytes) / float64(total), nil
}

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseSize reads "24GiB", "40GB", "1.5 TiB", "123456" (bytes) or "80%".
// Exactly one of bytes and percent is non-zero on success.
func parseSize(s string) (bytes uint64, percent float64, err error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v <= 0 || v > 100 || math.IsNaN(v) {
			return 0, 0, fmt.Errorf("a percentage must be a number in (0, 100]")
		}
		return 0, v, nil
	}
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, 0, fmt.Errorf("unknown unit %q", s[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return 0, 0, fmt.Errorf("not a positive size")
	}
	b := v * mult
	if b > 1<<62 {
		return 0, 0, fmt.Errorf("too large")
	}
	return uint64(b), 0, nil
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
