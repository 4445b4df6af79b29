// Package gpu measures GPU memory: the devices present and the memory used by
// a trial's whole process tree, sampled while it runs. Backends are NVML (the
// real driver), the simulator, or none.
package gpu

// Device describes one GPU.
type Device struct {
	Index  int    `json:"index"`
	UUID   string `json:"uuid,omitempty"`
	Name   string `json:"name"`
	Total  uint64 `json:"total_bytes"`
	Driver string `json:"driver,omitempty"`
	CUDA   string `json:"cuda,omitempty"` // CUDA driver API version, e.g. "13.0"
}

// Backend is a source of GPU memory figures. NVML and the simulator
// implement it; callers use it through a Sampler.
type Backend interface {
	// Devices lists the GPUs in index order.
	Devices() ([]Device, error)
	// ProcessMemory returns used bytes per PID on the device.
	ProcessMemory(device int) (map[int]uint64, error)
	// UsedMemory returns the device's total used bytes (all processes).
	UsedMemory(device int) (uint64, error)
	// Close releases the backend.
	Close() error
}
