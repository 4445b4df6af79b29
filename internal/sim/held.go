package sim

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hold"
)

var _ hold.Holder = (*Backend)(nil)

// holds numbers this process's holds, each its own file.
var holds atomic.Int64

// Hold takes a simulated device's free memory down to leave, as
// hold.CUDA does on a real one: batchfit's own process holds the rest,
// listed by ProcessMemory as NVML lists it, and a trial's child finds
// only leave free. The hold ends with Release, or when batchfit exits.
func (b *Backend) Hold(device gpu.Device, leave uint64) (hold.Hold, error) {
	if b.card.Dir == "" {
		return nil, fmt.Errorf("%w: the simulated card keeps no state", hold.ErrUnavailable)
	}
	if err := b.checkDevice(device.Index); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(string(b.state), 0o700); err != nil {
		return nil, fmt.Errorf("hold simulated memory: %w", err)
	}
	unlock, err := b.state.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	used, err := b.UsedMemory(device.Index)
	if err != nil {
		return nil, err
	}
	free := b.card.Total - min(used, b.card.Total)
	if free < leave {
		return nil, fmt.Errorf("hold memory on %s: %w", b.card.Name, &hold.ShortError{Device: b.card.Name, Free: free, Want: leave})
	}
	path := b.state.heldPath(os.Getpid(), device.Index, int(holds.Add(1)))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(free-leave, 10)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("hold simulated memory: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("hold simulated memory: %w", err)
	}
	return &simHold{path: path, free: leave}, nil
}

type simHold struct {
	path string
	free uint64
}

func (h *simHold) Free() uint64 { return h.free }

func (h *simHold) Release() error {
	if err := os.Remove(h.path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("release simulated memory: %w", err)
	}
	return nil
}
