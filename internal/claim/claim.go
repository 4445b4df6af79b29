// Package claim gives a search the GPUs it runs on to itself, on this
// machine: one lock file per GPU, held with flock(2) from before the run is
// recorded until it ends. Taking the lock is one atomic step, so of two
// searches started together exactly one gets the GPU; the kernel drops the
// lock however its holder ends, SIGKILL included, so a claim is never
// stale; and it needs no history, so --no-db searches claim as well.
package claim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/gpu"
)

// holderWait bounds how long Take waits for the holder of a lock to name
// its run. The holder writes it right after recording the run, which takes
// milliseconds; a refusal that names the run is worth the wait.
const holderWait = 2 * time.Second

// Holder is the search holding a GPU, as its lock file says.
type Holder struct {
	PID     int      `json:"pid"`
	Command []string `json:"command"`
	// Run is the run's id in the history; "" before it is recorded, or
	// when it is not (--no-db).
	Run string `json:"run,omitempty"`
	// Recorded says Run is final: the history has recorded the run, or
	// never will.
	Recorded bool `json:"recorded,omitempty"`
}

// HeldError is a claim refused because another search holds one of the
// GPUs.
type HeldError struct {
	Device gpu.Device
	Holder Holder // what its lock file says; the zero Holder if nothing yet
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("gpu %d (%s) is claimed by another batchfit (pid %d)", e.Device.Index, e.Device.Name, e.Holder.PID)
}

// Locks are the lock files in Dir, one per GPU. Every batchfit that
// searches on this machine must use the same Dir.
type Locks struct{ Dir string }

// Take claims devices for the search h and holds them until Release, or
// until this process ends. When another search holds one of them it
// returns a *HeldError naming it, and holds none.
func (l Locks) Take(devices []gpu.Device, h Holder) (*Claim, error) {
	if len(devices) == 0 {
		return &Claim{}, nil
	}
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("claim the GPUs: %w", err)
	}
	c := &Claim{holder: h}
	for _, d := range devices {
		f, err := l.take(d)
		if err != nil {
			c.Release()
			return nil, err
		}
		c.files = append(c.files, f)
	}
	if err := c.write(); err != nil {
		c.Release()
		return nil, err
	}
	return c, nil
}

// take locks d's file, or returns a *HeldError once the holder has named
// its run (or holderWait has passed); it takes the lock if the holder lets
// go meanwhile.
func (l Locks) take(d gpu.Device) (*os.File, error) {
	path := filepath.Join(l.Dir, fileName(d))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("claim gpu %d: %w", d.Index, err)
	}
	deadline := time.Now().Add(holderWait)
	for {
		err := lock(f)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, errHeld) {
			f.Close()
			return nil, fmt.Errorf("claim gpu %d: lock %s: %w", d.Index, path, err)
		}
		h, ok := readHolder(path)
		if (ok && h.Recorded) || time.Now().After(deadline) {
			f.Close()
			return nil, &HeldError{Device: d, Holder: h}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fileName is d's lock file: by UUID, which is the same whatever
// CUDA_VISIBLE_DEVICES says, else by index and name.
func fileName(d gpu.Device) string {
	key := d.UUID
	if key == "" {
		key = fmt.Sprintf("%d-%s", d.Index, d.Name)
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, key) + ".lock"
}

func readHolder(path string) (Holder, bool) {
	var h Holder
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &h) != nil {
		return Holder{}, false
	}
	return h, true
}

// Claim is the GPUs a search holds. The zero Claim holds none.
type Claim struct {
	files  []*os.File
	holder Holder
}

// Recorded names the run in the lock files, once the history has recorded
// it ("" when it is not recorded), for a search refused meanwhile to name.
func (c *Claim) Recorded(runID string) error {
	c.holder.Run, c.holder.Recorded = runID, true
	return c.write()
}

func (c *Claim) write() error {
	b, err := json.Marshal(c.holder)
	if err != nil {
		return err
	}
	for _, f := range c.files {
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("write the GPU claim %s: %w", f.Name(), err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			return fmt.Errorf("write the GPU claim %s: %w", f.Name(), err)
		}
	}
	return nil
}

// Release lets go of the GPUs. The files are emptied first, so that no
// later search reads a holder that is gone.
func (c *Claim) Release() {
	for _, f := range c.files {
		f.Truncate(0)
		f.Close() // closing the only descriptor drops the lock
	}
	c.files = nil
}

// None claims nothing: for tests of what runs on the GPUs, and where
// there is no place for the lock files.
type None struct{}

// Take holds nothing.
func (None) Take([]gpu.Device, Holder) (*Claim, error) { return &Claim{}, nil }

// errHeld means another open file holds the lock.
var errHeld = errors.New("held by another process")

// lock takes f's exclusive lock without waiting. flock's lock belongs to
// the open file, which Go opens close-on-exec: trials do not inherit it,
// and it ends with this process.
func lock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errHeld
	}
	return err
}
