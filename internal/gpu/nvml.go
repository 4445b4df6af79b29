//go:build cgo && linux

package gpu

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// valueNotAvailable is NVML_VALUE_NOT_AVAILABLE as NVML stores it in an
// unsigned field: a process's memory is unknown (no permission, some vGPU
// and container setups), not 16 EiB.
const valueNotAvailable = math.MaxUint64

// Open loads libnvidia-ml.so.1 at run time and returns the NVML backend. When
// the library or the kernel driver is absent the error wraps ErrNoDriver;
// nothing is linked against the driver, so a machine without one still runs.
func Open() (Backend, error) {
	b, err := openNVML(newDLNVML())
	if err != nil {
		return nil, err
	}
	return b, nil
}

// nvmlBackend reads memory through an nvmlLib: the real library, or a mock
// in tests.
type nvmlBackend struct {
	lib     nvmlLib
	handles []nvmlDevice

	// memV2 is cleared the first time GetMemoryInfo_v2 fails, so that every
	// later reading uses v1 and "used" means the same thing throughout a
	// trial (v2 excludes driver-reserved memory, v1 includes it).
	memV2 atomic.Bool
	// cudaV2 says SystemGetCudaDriverVersion_v2 exists. Calling a symbol the
	// loaded library lacks would abort the process, so check first.
	cudaV2 bool

	closeOnce sync.Once
	closeErr  error
}

var _ Backend = (*nvmlBackend)(nil)

func openNVML(lib nvmlLib) (*nvmlBackend, error) {
	switch ret := lib.Init(); ret {
	case nvmlSuccess:
	case nvmlErrorLibraryNotFound:
		return nil, ErrNoDriver
	case nvmlErrorDriverNotLoaded:
		return nil, noDriverError("NVIDIA kernel driver not loaded (libnvidia-ml.so.1 is present)")
	default:
		return nil, fmt.Errorf("initialize nvml: %w", ret)
	}
	b := &nvmlBackend{lib: lib}
	n, ret := lib.DeviceGetCount()
	if ret != nvmlSuccess {
		lib.Shutdown()
		return nil, fmt.Errorf("count gpus: %w", ret)
	}
	if n == 0 {
		lib.Shutdown()
		return nil, ErrNoDevice
	}
	for i := range n {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvmlSuccess {
			lib.Shutdown()
			return nil, fmt.Errorf("open gpu %d: %w", i, ret)
		}
		b.handles = append(b.handles, h)
	}
	b.memV2.Store(lib.HasSymbol("nvmlDeviceGetMemoryInfo_v2"))
	b.cudaV2 = lib.HasSymbol("nvmlSystemGetCudaDriverVersion_v2")
	return b, nil
}

// Devices lists the GPUs with their identity, total memory and the driver's
// versions. Versions are best effort: an old driver missing one leaves it empty.
func (b *nvmlBackend) Devices() ([]Device, error) {
	driver, cuda := b.versions()
	devs := make([]Device, 0, len(b.handles))
	for i, h := range b.handles {
		uuid, ret := h.GetUUID()
		if ret != nvmlSuccess {
			return nil, fmt.Errorf("gpu %d: read uuid: %w", i, ret)
		}
		name, ret := h.GetName()
		if ret != nvmlSuccess {
			return nil, fmt.Errorf("gpu %d: read name: %w", i, ret)
		}
		total, _, err := b.memory(h)
		if err != nil {
			return nil, fmt.Errorf("gpu %d: %w", i, err)
		}
		devs = append(devs, Device{Index: i, UUID: uuid, Name: name, Total: total, Driver: driver, CUDA: cuda})
	}
	return devs, nil
}

func (b *nvmlBackend) versions() (driver, cuda string) {
	if v, ret := b.lib.SystemGetDriverVersion(); ret == nvmlSuccess {
		driver = v
	}
	var v int
	var ret nvmlReturn
	if b.cudaV2 {
		v, ret = b.lib.SystemGetCudaDriverVersion_v2()
	} else {
		v, ret = b.lib.SystemGetCudaDriverVersion()
	}
	if ret == nvmlSuccess && v > 0 {
		cuda = cudaVersion(v)
	}
	return driver, cuda
}

// cudaVersion turns NVML's encoded CUDA version (1000*major + 10*minor, e.g.
// 13000) into "13.0".
func cudaVersion(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// memory returns the device's total and used bytes, preferring the v2 query.
func (b *nvmlBackend) memory(h nvmlDevice) (total, used uint64, err error) {
	if b.memV2.Load() {
		m, ret := h.GetMemoryInfo_v2()
		if ret == nvmlSuccess {
			return m.Total, m.Used, nil
		}
		b.memV2.Store(false)
	}
	m, ret := h.GetMemoryInfo()
	if ret != nvmlSuccess {
		return 0, 0, fmt.Errorf("read memory info: %w", ret)
	}
	return m.Total, m.Used, nil
}

func (b *nvmlBackend) handle(device int) (nvmlDevice, error) {
	if device < 0 || device >= len(b.handles) {
		return nil, fmt.Errorf("gpu %d: no such device (have %d)", device, len(b.handles))
	}
	return b.handles[device], nil
}

// ProcessMemory returns the union of the compute, graphics and MPS process
// lists. A PID in several lists is counted once (its largest figure): NVML
// reports the process's whole usage in each. Processes whose usage NVML
// cannot report are left out, so a sampler that finds none of its processes
// falls back to device-level figures instead of trusting a bogus number.
func (b *nvmlBackend) ProcessMemory(device int) (map[int]uint64, error) {
	h, err := b.handle(device)
	if err != nil {
		return nil, err
	}
	lists := []struct {
		kind string
		get  func() ([]nvmlProcess, nvmlReturn)
	}{
		{"compute", h.GetComputeRunningProcesses},
		{"graphics", h.GetGraphicsRunningProcesses},
		{"mps", h.GetMPSComputeRunningProcesses},
	}
	out := make(map[int]uint64)
	for _, l := range lists {
		procs, ret := l.get()
		switch ret {
		case nvmlSuccess:
		case nvmlErrorNotSupported, nvmlErrorFunctionNotFound:
			// Compute-only GPUs may not keep a graphics list, and MPS
			// lists exist only under MPS (and in drivers that know of
			// it): an absent list is an empty one.
			continue
		default:
			return nil, fmt.Errorf("gpu %d: list %s processes: %w", device, l.kind, ret)
		}
		for _, p := range procs {
			if p.UsedGpuMemory == valueNotAvailable {
				continue
			}
			pid := int(p.Pid)
			if cur, ok := out[pid]; !ok || p.UsedGpuMemory > cur {
				out[pid] = p.UsedGpuMemory
			}
		}
	}
	return out, nil
}

// UsedMemory returns the device's used bytes, all processes together.
func (b *nvmlBackend) UsedMemory(device int) (uint64, error) {
	h, err := b.handle(device)
	if err != nil {
		return 0, err
	}
	_, used, err := b.memory(h)
	if err != nil {
		return 0, fmt.Errorf("gpu %d: %w", device, err)
	}
	return used, nil
}

// Close shuts NVML down; later calls return the first call's result.
func (b *nvmlBackend) Close() error {
	b.closeOnce.Do(func() {
		if ret := b.lib.Shutdown(); ret != nvmlSuccess {
			b.closeErr = fmt.Errorf("shut down nvml: %w", ret)
		}
	})
	return b.closeErr
}
