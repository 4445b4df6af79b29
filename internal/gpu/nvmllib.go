//go:build cgo && linux

package gpu

import "fmt"

// nvmlLib is the part of NVML the backend reads, in batchfit's own types:
// libnvidia-ml loaded at run time (dlNVML), or a fake in tests.
type nvmlLib interface {
	Init() nvmlReturn
	Shutdown() nvmlReturn
	DeviceGetCount() (int, nvmlReturn)
	DeviceGetHandleByIndex(i int) (nvmlDevice, nvmlReturn)
	// HasSymbol says whether the loaded library has the function: calling
	// one it lacks would abort the process.
	HasSymbol(name string) bool
	SystemGetDriverVersion() (string, nvmlReturn)
	SystemGetCudaDriverVersion() (int, nvmlReturn)
	SystemGetCudaDriverVersion_v2() (int, nvmlReturn)
}

// nvmlDevice is one GPU of an nvmlLib.
type nvmlDevice interface {
	GetUUID() (string, nvmlReturn)
	GetName() (string, nvmlReturn)
	GetMemoryInfo() (nvmlMemory, nvmlReturn)
	GetMemoryInfo_v2() (nvmlMemory, nvmlReturn)
	GetComputeRunningProcesses() ([]nvmlProcess, nvmlReturn)
	GetGraphicsRunningProcesses() ([]nvmlProcess, nvmlReturn)
	GetMPSComputeRunningProcesses() ([]nvmlProcess, nvmlReturn)
}

// nvmlMemory is a device's memory as nvmlDeviceGetMemoryInfo(_v2) reports it.
type nvmlMemory struct{ Total, Used uint64 }

// nvmlProcess is one entry of a device's process list.
type nvmlProcess struct {
	Pid           uint32
	UsedGpuMemory uint64
}

// nvmlReturn is nvmlReturn_t: NVML's status code.
type nvmlReturn int32

// The codes the backend tells apart (nvml.h).
const (
	nvmlSuccess               nvmlReturn = 0
	nvmlErrorNotSupported     nvmlReturn = 3
	nvmlErrorInsufficientSize nvmlReturn = 7
	nvmlErrorDriverNotLoaded  nvmlReturn = 9
	nvmlErrorLibraryNotFound  nvmlReturn = 12
	nvmlErrorFunctionNotFound nvmlReturn = 13
)

// nvmlErrors are nvmlErrorString's words for the codes of nvml.h.
var nvmlErrors = map[nvmlReturn]string{
	1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions",
	5: "Already Initialized", 6: "Not Found", 7: "Insufficient Size", 8: "Insufficient External Power",
	9: "Driver Not Loaded", 10: "Timeout", 11: "Interrupt request issue", 12: "NVML Shared Library Not Found",
	13: "Function Not Found", 14: "Corrupted infoROM", 15: "GPU is lost", 16: "GPU requires restart",
	17: "GPU access blocked by the operating system", 18: "Driver/library version mismatch", 19: "In use by another client",
	20: "Insufficient Memory", 21: "No data", 22: "vGPU ECC not supported", 23: "Insufficient resources",
	24: "Frequency not supported", 25: "Argument version mismatch", 26: "Deprecated", 27: "Not ready",
	28: "GPU not found", 29: "Invalid state", 30: "Reset type not supported", 999: "Unknown Error",
}

func (r nvmlReturn) Error() string {
	if s, ok := nvmlErrors[r]; ok {
		return s
	}
	return fmt.Sprintf("nvml error %d", int32(r))
}
