//go:build !cgo || !linux

package gpu

import "runtime"

// Open reports ErrNoDriver: NVML is loaded through cgo on Linux only, and
// this binary was built without it.
func Open() (Backend, error) {
	if runtime.GOOS != "linux" {
		return nil, noDriverError("NVML sampling is supported on linux only")
	}
	return nil, noDriverError("NVML support not built in (built with CGO_ENABLED=0)")
}
