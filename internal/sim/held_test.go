package sim

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchfit/batchfit/internal/hold"
)

// A hold lists batchfit's own process holding the rest of the card, leaves
// exactly what was asked free, and is gone once released.
func TestBackendHold(t *testing.T) {
	card := H100()
	card.Dir = t.TempDir()
	b := NewBackend(card)
	devices, _ := b.Devices()
	h, err := b.Hold(devices[0], 24<<30)
	if err != nil {
		t.Fatal(err)
	}
	if h.Free() != 24<<30 {
		t.Errorf("Free = %d, want 24 GiB", h.Free())
	}
	procs, _ := b.ProcessMemory(0)
	if got := procs[os.Getpid()]; got != card.Total-24<<30 {
		t.Errorf("this process holds %d, want %d", got, card.Total-24<<30)
	}
	if _, err := b.Hold(devices[0], 30<<30); !errors.As(err, new(*hold.ShortError)) {
		t.Errorf("a hold of 30 GiB on the held card: %v; want a ShortError", err)
	}
	more, err := b.Hold(devices[0], 20<<30) // a hold of its own, beside the first
	if err != nil {
		t.Fatal(err)
	}
	if used, _ := b.UsedMemory(0); used != card.Total-20<<30 {
		t.Errorf("%d bytes used under two holds, want %d", used, card.Total-20<<30)
	}
	if err := more.Release(); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if used, _ := b.UsedMemory(0); used != 0 {
		t.Errorf("%d bytes used after the release", used)
	}
}

// The hold of a process that died is freed, as the driver frees a dead
// process's memory.
func TestHoldOfADeadProcessIsFreed(t *testing.T) {
	card := H100()
	card.Dir = t.TempDir()
	dead := filepath.Join(card.Dir, "999999999-0-1"+heldSuffix)
	if err := os.WriteFile(dead, []byte("1000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := NewBackend(card)
	if used, _ := b.UsedMemory(0); used != 0 {
		t.Errorf("%d bytes used by a dead process", used)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead process's hold is still there: %v", err)
	}
}

// Without a state directory the simulated card cannot be held.
func TestHoldNeedsState(t *testing.T) {
	b := NewBackend(H100())
	devices, _ := b.Devices()
	if _, err := b.Hold(devices[0], 24<<30); !errors.Is(err, hold.ErrUnavailable) {
		t.Errorf("Hold = %v; want ErrUnavailable", err)
	}
}
