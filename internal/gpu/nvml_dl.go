//go:build cgo && linux

package gpu

import (
	"bytes"
	"sync"

	"github.com/ebitengine/purego"
)

// dlNVML is libnvidia-ml.so.1 opened at run time with dlopen (purego):
// nothing is linked against the driver, so a machine without one still
// runs batchfit. Its functions are called directly rather than through
// go-nvml, whose cgo wrappers of NVML's deprecated functions made the
// first build of batchfit print a compiler warning for each. It is built
// with cgo only, as go-nvml was: without cgo, purego would put its own
// stand-in for the C runtime (fakecgo) under every process batchfit runs,
// a change to the trial runner nothing here has measured.
type dlNVML struct {
	path    string // libnvidia-ml.so.1; a stand-in's in tests
	once    sync.Once
	handle  uintptr
	openErr bool

	init          func() nvmlReturn
	shutdown      func() nvmlReturn
	getCount      func(*uint32) nvmlReturn
	getHandle     func(uint32, *uintptr) nvmlReturn
	driverVersion func(*byte, uint32) nvmlReturn
	cudaVersion   func(*int32) nvmlReturn
	cudaVersionV2 func(*int32) nvmlReturn
	uuid, name    func(uintptr, *byte, uint32) nvmlReturn
	mem           func(uintptr, *memoryV1) nvmlReturn
	memV2         func(uintptr, *memoryV2) nvmlReturn
	// procs are the compute, graphics and MPS lists' newest functions.
	procs [3]procFuncs
}

var _ nvmlLib = (*dlNVML)(nil)

// memoryV1 is nvmlMemory_t.
type memoryV1 struct{ Total, Free, Used uint64 }

// memoryV2 is nvmlMemory_v2_t; Version must be memoryV2Version.
type memoryV2 struct {
	Version                     uint32
	_                           uint32
	Total, Reserved, Free, Used uint64
}

// memoryV2Version is NVML_STRUCT_VERSION(Memory, 2): the struct's size and
// its version in the top byte.
const memoryV2Version = 40 | 2<<24

// processV1 is nvmlProcessInfo_v1_t; processV2 nvmlProcessInfo_v2_t, which
// the _v3 functions fill too.
type processV1 struct {
	Pid           uint32
	_             uint32
	UsedGpuMemory uint64
}

type processV2 struct {
	Pid                              uint32
	_                                uint32
	UsedGpuMemory                    uint64
	GpuInstanceID, ComputeInstanceID uint32
}

// procFuncs is one process list's function of the newest version the
// library has: v1 fills processV1, v2 and v3 processV2.
type procFuncs struct {
	v1 func(uintptr, *uint32, *processV1) nvmlReturn
	v2 func(uintptr, *uint32, *processV2) nvmlReturn
}

// String buffer sizes of nvml.h.
const (
	uuidBufferSize          = 96 // NVML_DEVICE_UUID_V2_BUFFER_SIZE
	nameBufferSize          = 96 // NVML_DEVICE_NAME_V2_BUFFER_SIZE
	driverVersionBufferSize = 80 // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
)

// newDLNVML returns the library, opened at Init.
func newDLNVML() *dlNVML { return &dlNVML{path: "libnvidia-ml.so.1"} }

func (l *dlNVML) open() bool {
	l.once.Do(func() {
		h, err := purego.Dlopen(l.path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			l.openErr = true
			return
		}
		l.handle = h
		l.bind(&l.init, "nvmlInit_v2", "nvmlInit")
		l.bind(&l.shutdown, "nvmlShutdown")
		l.bind(&l.getCount, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount")
		l.bind(&l.getHandle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex")
		l.bind(&l.driverVersion, "nvmlSystemGetDriverVersion")
		l.bind(&l.cudaVersion, "nvmlSystemGetCudaDriverVersion")
		l.bind(&l.cudaVersionV2, "nvmlSystemGetCudaDriverVersion_v2")
		l.bind(&l.uuid, "nvmlDeviceGetUUID")
		l.bind(&l.name, "nvmlDeviceGetName")
		l.bind(&l.mem, "nvmlDeviceGetMemoryInfo")
		l.bind(&l.memV2, "nvmlDeviceGetMemoryInfo_v2")
		for i, base := range []string{"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses", "nvmlDeviceGetMPSComputeRunningProcesses"} {
			if !l.bind(&l.procs[i].v2, base+"_v3", base+"_v2") {
				l.bind(&l.procs[i].v1, base)
			}
		}
	})
	return !l.openErr
}

// bind sets *fn to the first of names the library has; false when it has
// none of them, and *fn stays nil.
func (l *dlNVML) bind(fn any, names ...string) bool {
	for _, name := range names {
		if sym, err := purego.Dlsym(l.handle, name); err == nil && sym != 0 {
			purego.RegisterFunc(fn, sym)
			return true
		}
	}
	return false
}

func (l *dlNVML) HasSymbol(name string) bool {
	if !l.open() {
		return false
	}
	sym, err := purego.Dlsym(l.handle, name)
	return err == nil && sym != 0
}

func (l *dlNVML) Init() nvmlReturn {
	if !l.open() {
		return nvmlErrorLibraryNotFound
	}
	if l.init == nil {
		return nvmlErrorFunctionNotFound
	}
	return l.init()
}

func (l *dlNVML) Shutdown() nvmlReturn {
	if l.shutdown == nil {
		return nvmlErrorFunctionNotFound
	}
	return l.shutdown()
}

func (l *dlNVML) DeviceGetCount() (int, nvmlReturn) {
	if l.getCount == nil {
		return 0, nvmlErrorFunctionNotFound
	}
	var n uint32
	ret := l.getCount(&n)
	return int(n), ret
}

func (l *dlNVML) DeviceGetHandleByIndex(i int) (nvmlDevice, nvmlReturn) {
	if l.getHandle == nil {
		return nil, nvmlErrorFunctionNotFound
	}
	var h uintptr
	if ret := l.getHandle(uint32(i), &h); ret != nvmlSuccess {
		return nil, ret
	}
	return dlDevice{l: l, h: h}, nvmlSuccess
}

func (l *dlNVML) SystemGetDriverVersion() (string, nvmlReturn) {
	return cString(driverVersionBufferSize, func(b *byte, n uint32) nvmlReturn {
		if l.driverVersion == nil {
			return nvmlErrorFunctionNotFound
		}
		return l.driverVersion(b, n)
	})
}

func (l *dlNVML) SystemGetCudaDriverVersion() (int, nvmlReturn) {
	return cudaDriverVersion(l.cudaVersion)
}

func (l *dlNVML) SystemGetCudaDriverVersion_v2() (int, nvmlReturn) {
	return cudaDriverVersion(l.cudaVersionV2)
}

func cudaDriverVersion(f func(*int32) nvmlReturn) (int, nvmlReturn) {
	if f == nil {
		return 0, nvmlErrorFunctionNotFound
	}
	var v int32
	ret := f(&v)
	return int(v), ret
}

// cString reads a NUL-terminated string NVML writes into a buffer of size.
func cString(size uint32, f func(*byte, uint32) nvmlReturn) (string, nvmlReturn) {
	buf := make([]byte, size)
	if ret := f(&buf[0], size); ret != nvmlSuccess {
		return "", ret
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), nvmlSuccess
}

// dlDevice is one GPU's handle (nvmlDevice_t) in a dlNVML.
type dlDevice struct {
	l *dlNVML
	h uintptr
}

func (d dlDevice) GetUUID() (string, nvmlReturn) {
	return cString(uuidBufferSize, func(b *byte, n uint32) nvmlReturn {
		if d.l.uuid == nil {
			return nvmlErrorFunctionNotFound
		}
		return d.l.uuid(d.h, b, n)
	})
}

func (d dlDevice) GetName() (string, nvmlReturn) {
	return cString(nameBufferSize, func(b *byte, n uint32) nvmlReturn {
		if d.l.name == nil {
			return nvmlErrorFunctionNotFound
		}
		return d.l.name(d.h, b, n)
	})
}

func (d dlDevice) GetMemoryInfo() (nvmlMemory, nvmlReturn) {
	if d.l.mem == nil {
		return nvmlMemory{}, nvmlErrorFunctionNotFound
	}
	m := new(memoryV1)
	ret := d.l.mem(d.h, m)
	return nvmlMemory{Total: m.Total, Used: m.Used}, ret
}

func (d dlDevice) GetMemoryInfo_v2() (nvmlMemory, nvmlReturn) {
	if d.l.memV2 == nil {
		return nvmlMemory{}, nvmlErrorFunctionNotFound
	}
	m := &memoryV2{Version: memoryV2Version}
	ret := d.l.memV2(d.h, m)
	return nvmlMemory{Total: m.Total, Used: m.Used}, ret
}

func (d dlDevice) GetComputeRunningProcesses() ([]nvmlProcess, nvmlReturn) {
	return d.processes(d.l.procs[0])
}

func (d dlDevice) GetGraphicsRunningProcesses() ([]nvmlProcess, nvmlReturn) {
	return d.processes(d.l.procs[1])
}

func (d dlDevice) GetMPSComputeRunningProcesses() ([]nvmlProcess, nvmlReturn) {
	return d.processes(d.l.procs[2])
}

// processes reads a process list, growing the buffer while NVML says it is
// too small (processes can start between two calls).
func (d dlDevice) processes(p procFuncs) ([]nvmlProcess, nvmlReturn) {
	for n := uint32(16); ; n *= 2 {
		count := n
		var out []nvmlProcess
		var ret nvmlReturn
		switch {
		case p.v2 != nil:
			buf := make([]processV2, n)
			ret = p.v2(d.h, &count, &buf[0])
			for _, e := range buf[:min(count, n)] {
				out = append(out, nvmlProcess{Pid: e.Pid, UsedGpuMemory: e.UsedGpuMemory})
			}
		case p.v1 != nil:
			buf := make([]processV1, n)
			ret = p.v1(d.h, &count, &buf[0])
			for _, e := range buf[:min(count, n)] {
				out = append(out, nvmlProcess{Pid: e.Pid, UsedGpuMemory: e.UsedGpuMemory})
			}
		default:
			return nil, nvmlErrorFunctionNotFound
		}
		switch {
		case ret == nvmlSuccess:
			return out, ret
		case ret != nvmlErrorInsufficientSize || n >= 1<<16:
			return nil, ret
		}
	}
}
