package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/batchfit/batchfit/internal/units"
)

// ErrNoDriver means the NVIDIA driver library cannot be used here: it is
// absent, its kernel module is not loaded, or this binary was built without
// cgo. Callers carry on without GPU memory sampling.
var ErrNoDriver = errors.New("no NVIDIA driver found (libnvidia-ml.so.1)")

// noDriverError is an ErrNoDriver worded for a cause other than a missing
// library, so the hint names the real problem.
type noDriverError string

func (e noDriverError) Error() string        { return string(e) }
func (e noDriverError) Is(target error) bool { return target == ErrNoDriver }

// ErrNoDevice means the driver is present but reports no GPU.
var ErrNoDevice = errors.New("no NVIDIA GPU found")

// Detect opens the best backend available. Without one it returns Null{}
// and an error that reads as a one-line hint, e.g. "no NVIDIA driver found
// (libnvidia-ml.so.1): GPU memory will not be sampled": the caller carries
// on, measuring nothing.
func Detect() (Backend, error) {
	b, err := Open()
	if err != nil {
		return Null{}, fmt.Errorf("%w: GPU memory will not be sampled", err)
	}
	return b, nil
}

// Null is the backend of a machine without a GPU driver: no devices, no
// figures. A Sampler over it measures nothing.
type Null struct{}

var _ Backend = Null{}

// Devices lists none.
func (Null) Devices() ([]Device, error) { return nil, nil }

// ProcessMemory knows no device.
func (Null) ProcessMemory(device int) (map[int]uint64, error) {
	return nil, fmt.Errorf("gpu %d: %w", device, ErrNoDevice)
}

// UsedMemory knows no device.
func (Null) UsedMemory(device int) (uint64, error) {
	return 0, fmt.Errorf("gpu %d: %w", device, ErrNoDevice)
}

// Close does nothing.
func (Null) Close() error { return nil }

// Describe reports what b sees, one line per device, for debugging a real
// machine: name, UUID, memory, driver and the processes using the GPU.
func Describe(b Backend) string {
	if b == nil {
		return "no GPU backend\n"
	}
	devs, err := b.Devices()
	if err != nil {
		return fmt.Sprintf("list devices: %v\n", err)
	}
	if len(devs) == 0 {
		return "no GPUs\n"
	}
	var sb strings.Builder
	for _, d := range devs {
		fmt.Fprintf(&sb, "gpu %d: %s %s, %s total", d.Index, d.Name, d.UUID, units.Bytes(d.Total))
		if used, err := b.UsedMemory(d.Index); err != nil {
			fmt.Fprintf(&sb, ", used: %v", err)
		} else {
			fmt.Fprintf(&sb, ", %s used", units.Bytes(used))
		}
		fmt.Fprintf(&sb, ", driver %s, CUDA %s", orNone(d.Driver), orNone(d.CUDA))
		procs, err := b.ProcessMemory(d.Index)
		switch {
		case err != nil:
			fmt.Fprintf(&sb, ", processes: %v", err)
		case len(procs) == 0:
			sb.WriteString(", no processes")
		default:
			sb.WriteString(", processes:")
			pids := make([]int, 0, len(procs))
			for pid := range procs {
				pids = append(pids, pid)
			}
			slices.Sort(pids)
			for _, pid := range pids {
				fmt.Fprintf(&sb, " %d=%s", pid, units.Bytes(procs[pid]))
			}
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func orNone(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
