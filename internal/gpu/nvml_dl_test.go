//go:build cgo && linux

package gpu

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
)

// fakeNVML builds testdata/fakenvml.c into a shared library and opens it
// as the backend would open libnvidia-ml.so.1: the same dlopen, symbols
// and structs, without a GPU.
func fakeNVML(t *testing.T) *nvmlBackend {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc, as a cgo build does")
	}
	lib := filepath.Join(t.TempDir(), "libfakenvml.so")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "testdata/fakenvml.c").CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in NVML: %v\n%s", err, out)
	}
	b, err := openNVML(&dlNVML{path: lib})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestDLNVML(t *testing.T) {
	b := fakeNVML(t)
	devs, err := b.Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Index: 0, UUID: "GPU-fake-0", Name: "NVIDIA Fake 0", Total: 1 << 30, Driver: "580.82.07", CUDA: "13.0"},
		{Index: 1, UUID: "GPU-fake-1", Name: "NVIDIA Fake 1", Total: 2 << 30, Driver: "580.82.07", CUDA: "13.0"},
	}
	if len(devs) != len(want) || devs[0] != want[0] || devs[1] != want[1] {
		t.Fatalf("Devices() = %+v, want %+v", devs, want)
	}
	// The v2 query, whose struct version the library checks.
	if used, err := b.UsedMemory(1); err != nil || used != 3<<20 {
		t.Errorf("UsedMemory(1) = %d, %v; want %d from nvmlDeviceGetMemoryInfo_v2", used, err, 3<<20)
	}
	// 40 compute processes (more than the first buffer holds), a graphics
	// list read in its v1 layout whose unknown figure is left out, and a
	// missing MPS function: an empty list.
	procs, err := b.ProcessMemory(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 40 || procs[1000] != 64<<20 || procs[1039] != 40<<20 {
		t.Errorf("ProcessMemory(0) = %d processes, pid 1000 %d, pid 1039 %d; want 40, %d, %d", len(procs), procs[1000], procs[1039], 64<<20, 40<<20)
	}
	if _, ok := procs[2000]; ok {
		t.Error("a process whose memory NVML cannot report was counted")
	}
	if procs, err := b.ProcessMemory(1); err != nil || len(procs) != 0 {
		t.Errorf("ProcessMemory(1) = %v, %v; want none", procs, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDLNVMLMissingLibrary(t *testing.T) {
	_, err := openNVML(&dlNVML{path: filepath.Join(t.TempDir(), "libnvidia-ml.so.1")})
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("openNVML without the library: %v, want ErrNoDriver", err)
	}
}
