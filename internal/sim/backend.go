package sim

import (
	"fmt"

	"github.com/batchfit/batchfit/internal/gpu"
)

// Backend is the gpu.Backend of a simulated card: it reads the memory the
// trial children register in the card's state directory, as NVML reads the
// driver's per-process accounting.
type Backend struct {
	card  Card
	state stateDir
}

var _ gpu.Backend = (*Backend)(nil)

// NewBackend returns a backend over card.Dir.
func NewBackend(card Card) *Backend {
	return &Backend{card: card, state: stateDir(card.Dir)}
}

// Devices lists the simulated devices.
func (b *Backend) Devices() ([]gpu.Device, error) {
	devs := make([]gpu.Device, b.card.devices())
	for i := range devs {
		devs[i] = gpu.Device{
			Index:  i,
			UUID:   simUUID(i),
			Name:   b.card.Name,
			Total:  b.card.Total,
			Driver: "sim",
			CUDA:   "13.0",
		}
	}
	return devs, nil
}

// simUUID is a stable, recognisably fake device UUID; the child accepts it in
// CUDA_VISIBLE_DEVICES as a real driver accepts real ones.
func simUUID(i int) string {
	return fmt.Sprintf("GPU-5140c0de-0000-4000-8000-%012d", i)
}

func (b *Backend) checkDevice(device int) error {
	if device < 0 || device >= b.card.devices() {
		return fmt.Errorf("simulated device %d: the card has %d", device, b.card.devices())
	}
	return nil
}

// ProcessMemory returns the bytes each live trial process holds on device.
// Memory leaked by earlier trials belongs to no live process and is not
// listed, as NVML does not list memory it cannot attribute. A child of a
// HoldPeak card that waits to exit is released once listed at its peak:
// the caller then has the peak in hand.
func (b *Backend) ProcessMemory(device int) (map[int]uint64, error) {
	procs, err := b.usage(device)
	if err != nil {
		return nil, err
	}
	b.state.release(procs)
	return procs, nil
}

func (b *Backend) usage(device int) (map[int]uint64, error) {
	if err := b.checkDevice(device); err != nil {
		return nil, err
	}
	if b.card.Dir == "" {
		return map[int]uint64{}, nil
	}
	return b.state.usage(device)
}

// UsedMemory returns all memory in use on device: live processes plus what
// earlier trials leaked. It releases no held child: a sampler attributes
// memory to a trial from ProcessMemory, and it is that reading that must
// see the peak.
func (b *Backend) UsedMemory(device int) (uint64, error) {
	procs, err := b.usage(device)
	if err != nil {
		return 0, err
	}
	var used uint64
	if b.card.Dir != "" {
		used = b.state.leak(device)
	}
	for _, n := range procs {
		used = satAdd(used, n)
	}
	return used, nil
}

// Close releases nothing: the state directory belongs to the caller.
func (b *Backend) Close() error { return nil }
