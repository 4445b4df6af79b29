//go:build cgo && linux

package gpu

import (
	"bufio"
	"errors"
	"maps"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/units"
)

const (
	h200Total = 144384 << 20
	a100Total = 40960 << 20
)

// mockServer is go-nvml's mock of a machine with an H200 and an A100,
// completed with the queries the stock mock leaves unset.
func mockServer(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.New(
		server.WithGPUs(gpus.H200_SXM5_141GB, gpus.A100_SXM4_40GB),
		server.WithDriverVersion("580.82.07"),
		server.WithCUDADriverVersion(12040),
	)
	if err != nil {
		t.Fatal(err)
	}
	s.SystemGetCudaDriverVersion_v2Func = func() (int, nvml.Return) { return 13000, nvml.SUCCESS }
	for i := range s.Devices {
		d := mockDevice(s, i)
		d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: d.MemoryInfo.Total, Used: d.MemoryInfo.Used}, nvml.SUCCESS
		}
		none := func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = none
		d.GetGraphicsRunningProcessesFunc = none
		d.GetMPSComputeRunningProcessesFunc = none
	}
	return s
}

func mockDevice(s *server.Server, i int) *server.Device {
	return s.Devices[i].(*server.Device)
}

func procList(ps ...nvml.ProcessInfo) func() ([]nvml.ProcessInfo, nvml.Return) {
	return func() ([]nvml.ProcessInfo, nvml.Return) { return ps, nvml.SUCCESS }
}

func openMock(t *testing.T, s *server.Server) *nvmlBackend {
	t.Helper()
	b, err := openNVML(goNVML{s})
	if err != nil {
		t.Fatalf("openNVML: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestNVMLDevices(t *testing.T) {
	s := mockServer(t)
	b := openMock(t, s)
	got, err := b.Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Index: 0, UUID: mockDevice(s, 0).UUID, Name: "NVIDIA H200 141GB HBM3e", Total: h200Total, Driver: "580.82.07", CUDA: "13.0"},
		{Index: 1, UUID: mockDevice(s, 1).UUID, Name: gpus.A100_SXM4_40GB.Name, Total: a100Total, Driver: "580.82.07", CUDA: "13.0"},
	}
	if len(got) != len(want) {
		t.Fatalf("Devices() = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("device %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// An older driver without the v2 symbols is read through v1; calling a
// missing symbol would abort the process.
func TestNVMLWithoutV2Symbols(t *testing.T) {
	s := mockServer(t)
	s.LookupSymbolFunc = func(name string) error {
		if strings.HasSuffix(name, "_v2") {
			return errors.New("undefined symbol")
		}
		return nil
	}
	s.SystemGetCudaDriverVersion_v2Func = func() (int, nvml.Return) {
		t.Error("SystemGetCudaDriverVersion_v2 called without its symbol")
		return 0, nvml.ERROR_FUNCTION_NOT_FOUND
	}
	for i := range s.Devices {
		mockDevice(s, i).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			t.Error("GetMemoryInfo_v2 called without its symbol")
			return nvml.Memory_v2{}, nvml.ERROR_FUNCTION_NOT_FOUND
		}
	}
	mockDevice(s, 0).MemoryInfo.Used = 7 << 30
	b := openMock(t, s)
	devs, err := b.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if devs[0].CUDA != "12.4" || devs[0].Total != h200Total {
		t.Errorf("device 0 = %+v, want CUDA 12.4 from v1 and total %d", devs[0], uint64(h200Total))
	}
	if used, err := b.UsedMemory(0); err != nil || used != 7<<30 {
		t.Errorf("UsedMemory(0) = %d, %v; want %d", used, err, uint64(7<<30))
	}
}

// v2 memory excludes driver-reserved memory and v1 includes it: once v2
// fails, every later reading must come from v1 so deltas stay consistent.
func TestNVMLMemoryFallsBackToV1ForGood(t *testing.T) {
	s := mockServer(t)
	d := mockDevice(s, 0)
	v2calls := 0
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		v2calls++
		return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED
	}
	d.MemoryInfo.Used = 3 << 30
	b := openMock(t, s)
	for range 3 {
		if used, err := b.UsedMemory(0); err != nil || used != 3<<30 {
			t.Fatalf("UsedMemory(0) = %d, %v; want %d", used, err, uint64(3<<30))
		}
	}
	if v2calls != 1 {
		t.Errorf("GetMemoryInfo_v2 called %d times, want 1", v2calls)
	}
}

func TestNVMLProcessMemory(t *testing.T) {
	tests := []struct {
		name                   string
		compute, graphics, mps func() ([]nvml.ProcessInfo, nvml.Return)
		want                   map[int]uint64
		wantErr                nvml.Return
	}{
		{
			name:     "none",
			compute:  procList(),
			graphics: procList(),
			mps:      procList(),
			want:     map[int]uint64{},
		},
		{
			name:     "union of compute and graphics",
			compute:  procList(nvml.ProcessInfo{Pid: 10, UsedGpuMemory: 1 << 30}, nvml.ProcessInfo{Pid: 11, UsedGpuMemory: 2 << 30}),
			graphics: procList(nvml.ProcessInfo{Pid: 12, UsedGpuMemory: 5 << 20}),
			mps:      procList(),
			want:     map[int]uint64{10: 1 << 30, 11: 2 << 30, 12: 5 << 20},
		},
		{
			name:     "a pid in two lists is counted once",
			compute:  procList(nvml.ProcessInfo{Pid: 10, UsedGpuMemory: 1 << 30}),
			graphics: procList(nvml.ProcessInfo{Pid: 10, UsedGpuMemory: 1 << 30}),
			mps:      procList(nvml.ProcessInfo{Pid: 10, UsedGpuMemory: 1 << 30}),
			want:     map[int]uint64{10: 1 << 30},
		},
		{
			name:     "not-available memory is unknown, not huge",
			compute:  procList(nvml.ProcessInfo{Pid: 10, UsedGpuMemory: valueNotAvailable}, nvml.ProcessInfo{Pid: 11, UsedGpuMemory: 0}),
			graphics: procList(),
			mps:      procList(),
			want:     map[int]uint64{11: 0},
		},
		{
			name:     "unsupported lists are empty",
			compute:  procList(nvml.ProcessInfo{Pid: 10, UsedGpuMemory: 4 << 30}),
			graphics: func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED },
			mps:      func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED },
			want:     map[int]uint64{10: 4 << 30},
		},
		{
			name:     "error",
			compute:  func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_GPU_IS_LOST },
			graphics: procList(),
			mps:      procList(),
			wantErr:  nvml.ERROR_GPU_IS_LOST,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mockServer(t)
			d := mockDevice(s, 1)
			d.GetComputeRunningProcessesFunc = tt.compute
			d.GetGraphicsRunningProcessesFunc = tt.graphics
			d.GetMPSComputeRunningProcessesFunc = tt.mps
			b := openMock(t, s)
			got, err := b.ProcessMemory(1)
			if tt.wantErr != nvml.SUCCESS {
				if !errors.Is(err, nvmlReturn(tt.wantErr)) {
					t.Fatalf("ProcessMemory(1) error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("ProcessMemory(1) = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNVMLBadDeviceIndex(t *testing.T) {
	b := openMock(t, mockServer(t))
	for _, i := range []int{-1, 2} {
		if _, err := b.ProcessMemory(i); err == nil {
			t.Errorf("ProcessMemory(%d) succeeded", i)
		}
		if _, err := b.UsedMemory(i); err == nil {
			t.Errorf("UsedMemory(%d) succeeded", i)
		}
	}
}

func TestNVMLOpenErrors(t *testing.T) {
	tests := []struct {
		name      string
		init      nvml.Return
		count     int
		wantNoDrv bool
		wantErr   error
	}{
		{name: "library missing", init: nvml.ERROR_LIBRARY_NOT_FOUND, wantNoDrv: true},
		{name: "kernel module missing", init: nvml.ERROR_DRIVER_NOT_LOADED, wantNoDrv: true},
		{name: "version mismatch", init: nvml.ERROR_LIB_RM_VERSION_MISMATCH, wantErr: nvmlReturn(nvml.ERROR_LIB_RM_VERSION_MISMATCH)},
		{name: "no gpus", init: nvml.SUCCESS, count: 0, wantErr: ErrNoDevice},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mockServer(t)
			s.InitFunc = func() nvml.Return { return tt.init }
			s.DeviceGetCountFunc = func() (int, nvml.Return) { return tt.count, nvml.SUCCESS }
			shutdowns := 0
			s.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
			b, err := openNVML(goNVML{s})
			if err == nil {
				b.Close()
				t.Fatal("openNVML succeeded")
			}
			if got := errors.Is(err, ErrNoDriver); got != tt.wantNoDrv {
				t.Errorf("errors.Is(%v, ErrNoDriver) = %v, want %v", err, got, tt.wantNoDrv)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			// NVML must be shut down again when Init succeeded and Open failed.
			if wantShut := map[bool]int{true: 1, false: 0}[tt.init == nvml.SUCCESS]; shutdowns != wantShut {
				t.Errorf("Shutdown called %d times, want %d", shutdowns, wantShut)
			}
		})
	}
}

func TestNVMLCloseTwice(t *testing.T) {
	s := mockServer(t)
	shutdowns := 0
	s.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
	b, err := openNVML(goNVML{s})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if shutdowns != 1 {
		t.Errorf("Shutdown called %d times, want 1", shutdowns)
	}
}

// The mock backend through a Sampler: the path a trial takes on a real GPU.
func TestNVMLSampler(t *testing.T) {
	s := mockServer(t)
	me := 4242
	mockDevice(s, 0).GetComputeRunningProcessesFunc = procList(
		nvml.ProcessInfo{Pid: uint32(me), UsedGpuMemory: 3 << 30},
		nvml.ProcessInfo{Pid: 999, UsedGpuMemory: 50 << 30},
	)
	b := openMock(t, s)
	smp := NewSampler(b, 0)
	smp.stat = fakeStat(map[int]procfs.Stat{me: {PPID: 1, PGRP: me}, 999: {PPID: 1, PGRP: 999}})
	got := smp.Start(me, nil).Stop()
	if got.Method != MethodProcess || got.Bytes != 3<<30 || got.PerDevice[0] != 3<<30 {
		t.Errorf("peak = %+v, want 3 GiB on gpu 0 by process", got)
	}
	if d := Describe(b); !strings.Contains(d, "gpu 0: NVIDIA H200 141GB HBM3e GPU-") || !strings.Contains(d, "4242=3.00 GiB") {
		t.Errorf("Describe = %q", d)
	}
}

// TestNVMLReal runs against the machine's driver when there is one: the debug
// entry point for a real GPU (go test ./internal/gpu -run Real -v).
func TestNVMLReal(t *testing.T) {
	b, err := Open()
	if err != nil {
		t.Skipf("no usable NVIDIA driver on this machine: %v", err)
	}
	defer b.Close()
	devs, err := b.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) == 0 {
		t.Fatal("Open succeeded with no devices")
	}
	for _, d := range devs {
		if d.Total == 0 || d.Name == "" {
			t.Errorf("device %+v lacks a name or total memory", d)
		}
	}
	t.Logf("\n%s", Describe(b))
}

// allocate2GiB holds 2 GiB on the GPU until its stdin closes.
const allocate2GiB = `
import sys, torch
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.read()
`

// TestSamplerRealGPU watches a real CUDA process the way the trial runner
// does: its own process group, watched from its start, the GPU work done by
// a child of the root. It needs a driver and python3 with torch.
func TestSamplerRealGPU(t *testing.T) {
	b, err := Open()
	if err != nil {
		t.Skipf("no usable NVIDIA driver on this machine: %v", err)
	}
	defer b.Close()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to run a CUDA process")
	}
	// "; true" keeps sh from exec-ing python, so python is the root's child.
	cmd := exec.Command("sh", "-c", `python3 -c "$1"; true`, "sh", allocate2GiB)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	w := NewSampler(b, 0).Start(cmd.Process.Pid, nil)
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		stdin.Close()
		cmd.Wait()
		if strings.Contains(stderr.String(), "No module named 'torch'") {
			t.Skip("python3 has no torch")
		}
		t.Fatalf("the CUDA process did not start: %s", stderr.String())
	}
	t.Logf("while it runs:\n%s", Describe(b))
	// The memory is held until stdin closes: wait for the ticker to see it.
	const want = 2 << 30
	deadline := time.Now().Add(10 * time.Second)
	for w.Peak().Bytes < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("CUDA process: %v\n%s", err, stderr.String())
	}
	got := w.Stop()
	t.Logf("peak: %+v (%s)", got, units.Bytes(got.Bytes))
	if got.Bytes < want || got.Method == "" {
		t.Errorf("peak = %+v, want at least %d bytes", got, want)
	}
}
