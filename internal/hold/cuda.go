//go:build cgo && linux

package hold

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct { char bytes[16]; } CUuuid;

static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetUuid)(CUuuid *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuMemGetInfo)(size_t *, size_t *);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);

static void *sym(void *lib, const char *v2, const char *v1) {
	void *f = v2 ? dlsym(lib, v2) : NULL;
	return f ? f : dlsym(lib, v1);
}

// bf_load opens the driver API and initialises it: 0, or -1 when the
// library or a symbol is missing, or cuInit's error.
static int bf_load(void) {
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) return -1;
	p_cuInit = sym(lib, NULL, "cuInit");
	p_cuDeviceGetCount = sym(lib, NULL, "cuDeviceGetCount");
	p_cuDeviceGet = sym(lib, NULL, "cuDeviceGet");
	p_cuDeviceGetUuid = sym(lib, "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
	p_cuDevicePrimaryCtxRetain = sym(lib, NULL, "cuDevicePrimaryCtxRetain");
	p_cuDevicePrimaryCtxRelease = sym(lib, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
	p_cuCtxSetCurrent = sym(lib, NULL, "cuCtxSetCurrent");
	p_cuMemGetInfo = sym(lib, "cuMemGetInfo_v2", "cuMemGetInfo");
	p_cuMemAlloc = sym(lib, "cuMemAlloc_v2", "cuMemAlloc");
	p_cuMemFree = sym(lib, "cuMemFree_v2", "cuMemFree");
	if (!p_cuInit || !p_cuDeviceGetCount || !p_cuDeviceGet || !p_cuDeviceGetUuid ||
	    !p_cuDevicePrimaryCtxRetain || !p_cuDevicePrimaryCtxRelease || !p_cuCtxSetCurrent ||
	    !p_cuMemGetInfo || !p_cuMemAlloc || !p_cuMemFree) return -1;
	return p_cuInit(0);
}

// bf_find sets *dev to the device whose UUID is uuid: 0, -1 when none.
static int bf_find(const char *uuid, int *dev) {
	int n = 0;
	CUresult r = p_cuDeviceGetCount(&n);
	if (r) return r;
	for (int i = 0; i < n; i++) {
		CUdevice d;
		CUuuid u;
		if (p_cuDeviceGet(&d, i) || p_cuDeviceGetUuid(&u, d)) continue;
		if (memcmp(u.bytes, uuid, 16) == 0) { *dev = d; return 0; }
	}
	return -1;
}

static int bf_retain(int dev, CUcontext *ctx) { return p_cuDevicePrimaryCtxRetain(ctx, dev); }
static int bf_release_ctx(int dev) { return p_cuDevicePrimaryCtxRelease(dev); }

static int bf_free_mem(CUcontext ctx, size_t *free, size_t *total) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemGetInfo(free, total);
}

static int bf_alloc(CUcontext ctx, size_t n, CUdeviceptr *p) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemAlloc(p, n);
}

static int bf_free(CUcontext ctx, CUdeviceptr p) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemFree(p);
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/batchfit/batchfit/internal/gpu"
)

// CUDA holds memory through the CUDA driver API, loaded at run time as
// NVML is: a machine without the driver still runs batchfit, and holds
// nothing. Devices are found by UUID, so CUDA_VISIBLE_DEVICES in
// batchfit's own environment and CUDA's device order do not matter.
type CUDA struct{}

var (
	loadOnce sync.Once
	loadErr  error
)

func load() error {
	loadOnce.Do(func() {
		if r := C.bf_load(); r != 0 {
			loadErr = fmt.Errorf("%w: the CUDA driver API (libcuda.so.1) did not load (%d)", ErrUnavailable, int(r))
		}
	})
	return loadErr
}

// Hold takes device's free memory down to leave.
func (CUDA) Hold(device gpu.Device, leave uint64) (Hold, error) {
	if err := load(); err != nil {
		return nil, err
	}
	uuid, err := uuidBytes(device.UUID)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var dev C.int
	if r := C.bf_find((*C.char)(unsafe.Pointer(&uuid[0])), &dev); r != 0 {
		return nil, fmt.Errorf("%w: CUDA does not see %s (%s)", ErrUnavailable, device.Name, device.UUID)
	}
	h := &cudaHold{dev: dev}
	if r := C.bf_retain(dev, &h.ctx); r != 0 {
		return nil, fmt.Errorf("hold memory on %s: cuDevicePrimaryCtxRetain: error %d", device.Name, int(r))
	}
	blocks, free, err := fill(h, leave)
	if err != nil {
		C.bf_release_ctx(dev)
		if se, ok := err.(*ShortError); ok {
			se.Device = device.Name
		}
		return nil, fmt.Errorf("hold memory on %s: %w", device.Name, err)
	}
	h.blocks, h.left = blocks, free
	return h, nil
}

type cudaHold struct {
	mu     sync.Mutex
	dev    C.int
	ctx    C.CUcontext
	blocks []block
	left   uint64
}

func (h *cudaHold) Free() uint64 { return h.left }

func (h *cudaHold) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var first error
	for _, b := range h.blocks {
		if err := h.release(b.ptr); err != nil && first == nil {
			first = err
		}
	}
	h.blocks = nil
	if h.ctx != nil {
		C.bf_release_ctx(h.dev)
		h.ctx = nil
	}
	return first
}

func (h *cudaHold) free() (uint64, error) {
	var free, total C.size_t
	if r := C.bf_free_mem(h.ctx, &free, &total); r != 0 {
		return 0, fmt.Errorf("cuMemGetInfo: error %d", int(r))
	}
	return uint64(free), nil
}

func (h *cudaHold) alloc(n uint64) (uint64, error) {
	var p C.CUdeviceptr
	if r := C.bf_alloc(h.ctx, C.size_t(n), &p); r != 0 {
		return 0, fmt.Errorf("cuMemAlloc of %d bytes: error %d", n, int(r))
	}
	return uint64(p), nil
}

func (h *cudaHold) release(p uint64) error {
	if r := C.bf_free(h.ctx, C.CUdeviceptr(p)); r != 0 {
		return fmt.Errorf("cuMemFree: error %d", int(r))
	}
	return nil
}
