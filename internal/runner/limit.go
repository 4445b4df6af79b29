package runner

import (
	"fmt"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/units"
)

// Limit is --memory-limit as given: a size in bytes or a share of the GPU.
// The zero Limit is no limit.
type Limit struct {
	Bytes   uint64
	Percent float64
}

const limitHint = "give --memory-limit as a size (24GiB, 40GB, 512MiB) or a share of the GPU (80%)"

// ParseLimit reads --memory-limit: "24GiB", "40GB", "80%"; "" is none.
func ParseLimit(s string) (Limit, error) {
	if s == "" {
		return Limit{}, nil
	}
	b, p, err := units.ParseSize(s)
	if err != nil {
		return Limit{}, configError(limitHint, "--memory-limit %q: %v", s, err)
	}
	return Limit{Bytes: b, Percent: p}, nil
}

// IsZero reports whether l is no limit.
func (l Limit) IsZero() bool { return l.Bytes == 0 && l.Percent == 0 }

// Resolve returns the limit in bytes on the first of devices, 0 for none.
func (l Limit) Resolve(devices []gpu.Device) (uint64, error) {
	if l.IsZero() {
		return 0, nil
	}
	if len(devices) == 0 {
		return 0, configError("--memory-limit needs the GPU's total memory, read through the NVIDIA driver; run where the driver is installed", "--memory-limit: no GPU found")
	}
	total := devices[0].Total
	bytes := l.Bytes
	if l.Percent > 0 {
		bytes = uint64(float64(total) * l.Percent / 100)
	}
	if bytes == 0 {
		return 0, configError(limitHint, "--memory-limit must be more than zero")
	}
	if bytes > total {
		return 0, configError(fmt.Sprintf("%s has %s; choose a smaller limit", devices[0].Name, units.Bytes(total)),
			"--memory-limit %s is more than the GPU's memory", units.Bytes(bytes))
	}
	return bytes, nil
}
