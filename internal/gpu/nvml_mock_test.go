//go:build cgo && linux

package gpu

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// goNVML is go-nvml's Interface as an nvmlLib, so that the backend's tests
// run on go-nvml's mock of a machine (nvml_test.go). Only the tests build
// go-nvml: the binary calls libnvidia-ml itself (dlNVML).
type goNVML struct{ nvml.Interface }

var _ nvmlLib = goNVML{}

func (g goNVML) Init() nvmlReturn     { return nvmlReturn(g.Interface.Init()) }
func (g goNVML) Shutdown() nvmlReturn { return nvmlReturn(g.Interface.Shutdown()) }

func (g goNVML) DeviceGetCount() (int, nvmlReturn) {
	n, ret := g.Interface.DeviceGetCount()
	return n, nvmlReturn(ret)
}

func (g goNVML) DeviceGetHandleByIndex(i int) (nvmlDevice, nvmlReturn) {
	d, ret := g.Interface.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return nil, nvmlReturn(ret)
	}
	return goNVMLDevice{d}, nvmlSuccess
}

func (g goNVML) HasSymbol(name string) bool {
	return g.Interface.Extensions().LookupSymbol(name) == nil
}

func (g goNVML) SystemGetDriverVersion() (string, nvmlReturn) {
	v, ret := g.Interface.SystemGetDriverVersion()
	return v, nvmlReturn(ret)
}

func (g goNVML) SystemGetCudaDriverVersion() (int, nvmlReturn) {
	v, ret := g.Interface.SystemGetCudaDriverVersion()
	return v, nvmlReturn(ret)
}

func (g goNVML) SystemGetCudaDriverVersion_v2() (int, nvmlReturn) {
	v, ret := g.Interface.SystemGetCudaDriverVersion_v2()
	return v, nvmlReturn(ret)
}

type goNVMLDevice struct{ d nvml.Device }

func (g goNVMLDevice) GetUUID() (string, nvmlReturn) {
	v, ret := g.d.GetUUID()
	return v, nvmlReturn(ret)
}

func (g goNVMLDevice) GetName() (string, nvmlReturn) {
	v, ret := g.d.GetName()
	return v, nvmlReturn(ret)
}

func (g goNVMLDevice) GetMemoryInfo() (nvmlMemory, nvmlReturn) {
	m, ret := g.d.GetMemoryInfo()
	return nvmlMemory{Total: m.Total, Used: m.Used}, nvmlReturn(ret)
}

func (g goNVMLDevice) GetMemoryInfo_v2() (nvmlMemory, nvmlReturn) {
	m, ret := g.d.GetMemoryInfo_v2()
	return nvmlMemory{Total: m.Total, Used: m.Used}, nvmlReturn(ret)
}

func (g goNVMLDevice) GetComputeRunningProcesses() ([]nvmlProcess, nvmlReturn) {
	return goProcesses(g.d.GetComputeRunningProcesses())
}

func (g goNVMLDevice) GetGraphicsRunningProcesses() ([]nvmlProcess, nvmlReturn) {
	return goProcesses(g.d.GetGraphicsRunningProcesses())
}

func (g goNVMLDevice) GetMPSComputeRunningProcesses() ([]nvmlProcess, nvmlReturn) {
	return goProcesses(g.d.GetMPSComputeRunningProcesses())
}

func goProcesses(ps []nvml.ProcessInfo, ret nvml.Return) ([]nvmlProcess, nvmlReturn) {
	var out []nvmlProcess
	for _, p := range ps {
		out = append(out, nvmlProcess{Pid: p.Pid, UsedGpuMemory: p.UsedGpuMemory})
	}
	return out, nvmlReturn(ret)
}
