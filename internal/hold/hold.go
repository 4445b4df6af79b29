// Package hold takes a GPU's memory down to a smaller card's: batchfit
// allocates all but the card's memory in its own process and keeps it
// while a trial runs, so that everything the trial does (its CUDA context,
// cuDNN's and cuBLAS's workspaces, NCCL's buffers, a framework's pool)
// has to fit in what the named card has, as it would there. The driver
// frees what a process held when it exits, however it dies, so nothing is
// left held after batchfit.
package hold

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/units"
)

// Holder holds GPU memory for trials on a held card.
type Holder interface {
	// Hold takes device's free memory down to leave bytes and keeps it
	// there until the Hold is released. It fails with ErrUnavailable
	// when memory cannot be held this way (no driver API, the device not
	// visible), and with a *ShortError when less than leave is free.
	Hold(device gpu.Device, leave uint64) (Hold, error)
}

// Hold is memory held on one device.
type Hold interface {
	// Free is what the device had free once the hold was taken: leave,
	// or less by at most Granularity.
	Free() uint64
	// Release gives the memory back.
	Release() error
}

// ErrUnavailable says that this machine cannot hold memory for a trial.
var ErrUnavailable = errors.New("GPU memory cannot be held here")

// ShortError says the device had less free than the card needs: another
// process holds memory on it.
type ShortError struct {
	Device     string
	Free, Want uint64
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("%s has %s free, less than the %s to leave", e.Device, units.Bytes(e.Free), units.Bytes(e.Want))
}

// Granularity is how close to leave a hold gets, from below: the driver
// hands out device memory in 2 MiB pages, and a hold within two of them
// is the card. A hold never leaves more than leave free.
const Granularity = 4 << 20

// device is what fill needs of a device: its free memory, and allocation
// and freeing of blocks.
type device interface {
	free() (uint64, error)
	alloc(n uint64) (ptr uint64, err error)
	release(ptr uint64) error
}

// block is one allocation of a hold.
type block struct{ ptr, size uint64 }

// fill allocates blocks on d until its free memory is at most leave, and
// within Granularity of it, and returns them. The first block takes nearly all of it; the
// driver's bookkeeping for a block moves the free figure by a little more
// or less than the block, so a few smaller steps follow, and a step that
// went below leave is taken again, smaller by what it overshot.
func fill(d device, leave uint64) (blocks []block, free uint64, err error) {
	undo := func() {
		for _, b := range blocks {
			_ = d.release(b.ptr)
		}
	}
	for range 8 {
		if free, err = d.free(); err != nil {
			undo()
			return nil, 0, err
		}
		if free <= leave && free+Granularity >= leave {
			return blocks, free, nil // never more than the card has
		}
		want := free - leave
		if free < leave {
			if len(blocks) == 0 {
				return nil, free, &ShortError{Free: free, Want: leave}
			}
			last := blocks[len(blocks)-1]
			blocks = blocks[:len(blocks)-1]
			if err = d.release(last.ptr); err != nil {
				undo()
				return nil, 0, err
			}
			over := leave - free
			if over >= last.size {
				continue
			}
			want = last.size - over
		}
		ptr, err := d.alloc(want)
		if err != nil {
			undo()
			return nil, 0, err
		}
		blocks = append(blocks, block{ptr, want})
	}
	undo()
	return nil, free, fmt.Errorf("GPU memory free would not settle at %s (last %s)", units.Bytes(leave), units.Bytes(free))
}

// uuidBytes reads NVML's "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func uuidBytes(s string) ([16]byte, error) {
	var out [16]byte
	h := strings.ReplaceAll(strings.TrimPrefix(s, "GPU-"), "-", "")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 16 {
		return out, fmt.Errorf("not a GPU UUID: %q", s)
	}
	copy(out[:], b)
	return out, nil
}
