package gpu

import (
	"errors"
	"strings"
	"testing"
)

func TestDetectWithoutDriver(t *testing.T) {
	if b, err := Open(); err == nil {
		b.Close()
		t.Skip("an NVIDIA driver is present; TestNVMLReal covers this machine")
	}
	b, err := Detect()
	if _, null := b.(Null); !null {
		t.Errorf("Detect returned %T with error %v, want Null", b, err)
	}
	if devs, derr := b.Devices(); len(devs) != 0 || derr != nil {
		t.Errorf("Null lists %v, %v; want none", devs, derr)
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Detect error = %v, want ErrNoDriver", err)
	}
	msg := err.Error()
	if !strings.HasSuffix(msg, ": GPU memory will not be sampled") || strings.Contains(msg, "\n") {
		t.Errorf("Detect error %q is not a one-line hint", msg)
	}
	t.Logf("hint: %s", msg)
}

func TestNoDriverErrorIsErrNoDriver(t *testing.T) {
	err := error(noDriverError("NVML support not built in"))
	if !errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice) {
		t.Errorf("errors.Is(%v, ErrNoDriver) = false or matches ErrNoDevice", err)
	}
	if err.Error() != "NVML support not built in" {
		t.Errorf("message = %q", err.Error())
	}
}

func TestDescribe(t *testing.T) {
	b := &fakeBackend{
		DevicesFunc: func() ([]Device, error) {
			return []Device{
				{Index: 0, UUID: "GPU-0a", Name: "NVIDIA H200", Total: 143771 << 20, Driver: "580.82.07", CUDA: "13.0"},
				{Index: 1, UUID: "GPU-1b", Name: "NVIDIA H200", Total: 143771 << 20},
			}, nil
		},
		ProcessMemoryFunc: func(d int) (map[int]uint64, error) {
			if d == 1 {
				return nil, errFake
			}
			return map[int]uint64{4242: 3 << 30, 17: 512 << 20}, nil
		},
		UsedMemoryFunc: func(d int) (uint64, error) { return 4 << 30, nil },
	}
	want := "gpu 0: NVIDIA H200 GPU-0a, 140.40 GiB total, 4.00 GiB used, driver 580.82.07, CUDA 13.0, processes: 17=512.0 MiB 4242=3.00 GiB\n" +
		"gpu 1: NVIDIA H200 GPU-1b, 140.40 GiB total, 4.00 GiB used, driver ?, CUDA ?, processes: fake failure\n"
	if got := Describe(b); got != want {
		t.Errorf("Describe =\n%s\nwant\n%s", got, want)
	}
	for _, tt := range []struct {
		b    Backend
		want string
	}{
		{nil, "no GPU backend\n"},
		{&fakeBackend{}, "list devices: fake failure\n"},
		{&fakeBackend{DevicesFunc: devices(0)}, "no GPUs\n"},
	} {
		if got := Describe(tt.b); got != tt.want {
			t.Errorf("Describe(%v) = %q, want %q", tt.b, got, tt.want)
		}
	}
}
