package sim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/batchfit/batchfit/internal/procfs"
)

// stateDir is the simulated device memory, shared through the file system by
// the trial children and the Backend:
//
//	<pid>.mem     "<device> <bytes>\n": what a live child holds on a device
//	leak-<device> "<bytes>\n": memory earlier trials left behind, owned by no live process
//	<pid>.hold    "<bytes>\n": a child of a HoldPeak card, about to exit, waits
//	              while this file exists; the Backend removes it when it lists
//	              the child holding these bytes
//	<pid>-<device>-<n>.held "<bytes>\n": what batchfit itself holds on a
//	              device for a trial on a held card (Backend.Hold), one file a hold
//	lock          flock'd around every allocation, so allocations on the
//	              card are atomic as cudaMalloc is
//
// A child's files are removed when it exits; the files of dead processes
// (killed, crashed hard) are ignored and cleaned up by readers, as the
// driver frees a dead process's memory.
type stateDir string

const (
	memSuffix  = ".mem"
	heldSuffix = ".held"
)

func (d stateDir) memPath(pid int) string {
	return filepath.Join(string(d), strconv.Itoa(pid)+memSuffix)
}

func (d stateDir) holdPath(pid int) string {
	return filepath.Join(string(d), strconv.Itoa(pid)+".hold")
}

func (d stateDir) heldPath(pid, dev, n int) string {
	return filepath.Join(string(d), fmt.Sprintf("%d-%d-%d%s", pid, dev, n, heldSuffix))
}

func (d stateDir) leakPath(dev int) string {
	return filepath.Join(string(d), "leak-"+strconv.Itoa(dev))
}

// lock takes the card-wide allocation lock.
func (d stateDir) lock() (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(string(d), "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open simulated card lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock simulated card: %w", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// register records that pid now holds n bytes on dev. The write is a rename
// so readers never see a half-written file.
func (d stateDir) register(pid, dev int, n uint64) error {
	tmp := d.memPath(pid) + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d\n", dev, n), 0o600); err != nil {
		return fmt.Errorf("record simulated memory: %w", err)
	}
	if err := os.Rename(tmp, d.memPath(pid)); err != nil {
		return fmt.Errorf("record simulated memory: %w", err)
	}
	return nil
}

func (d stateDir) unregister(pid int) {
	os.Remove(d.memPath(pid))
	os.Remove(d.holdPath(pid))
}

// hold asks the Backend to acknowledge that it has listed pid holding n
// bytes, its final figure. Like register it renames, so the Backend never
// reads a partly written figure.
func (d stateDir) hold(pid int, n uint64) error {
	tmp := d.holdPath(pid) + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d\n", n), 0o600); err != nil {
		return fmt.Errorf("hold simulated memory: %w", err)
	}
	if err := os.Rename(tmp, d.holdPath(pid)); err != nil {
		return fmt.Errorf("hold simulated memory: %w", err)
	}
	return nil
}

// held reports whether pid still waits for the Backend.
func (d stateDir) held(pid int) bool {
	_, err := os.Stat(d.holdPath(pid))
	return err == nil
}

// release acknowledges the holds of the processes listed: a hold is
// released when the listing has the figure it holds for. The figures only
// grow and the hold is written after the last one, so the listing saw the
// peak.
func (d stateDir) release(listed map[int]uint64) {
	for pid, n := range listed {
		b, err := os.ReadFile(d.holdPath(pid))
		if err != nil {
			continue
		}
		if want, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64); err == nil && want == n {
			os.Remove(d.holdPath(pid))
		}
	}
}

// usage returns the bytes each live process holds on dev. A missing
// directory is an idle card.
func (d stateDir) usage(dev int) (map[int]uint64, error) {
	out := map[int]uint64{}
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read simulated card state: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, heldSuffix) {
			if pid, n, ok := d.heldOn(name, dev); ok {
				out[pid] = satAdd(out[pid], n)
			}
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSuffix(name, memSuffix))
		if !strings.HasSuffix(name, memSuffix) || err != nil || pid <= 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(string(d), name))
		if err != nil {
			continue // removed by its process while we listed
		}
		var fdev int
		var n uint64
		if _, err := fmt.Sscanf(string(b), "%d %d", &fdev, &n); err != nil {
			continue
		}
		if !alive(pid) {
			d.unregister(pid)
			continue
		}
		if fdev == dev {
			out[pid] = n
		}
	}
	return out, nil
}

// heldOn reads the hold file name: its process and bytes when it holds
// memory on dev. The file of a process that died is removed.
func (d stateDir) heldOn(name string, dev int) (pid int, n uint64, ok bool) {
	var fdev int
	if _, err := fmt.Sscanf(strings.TrimSuffix(name, heldSuffix), "%d-%d", &pid, &fdev); err != nil || pid <= 0 {
		return 0, 0, false
	}
	path := filepath.Join(string(d), name)
	if !alive(pid) {
		os.Remove(path)
		return 0, 0, false
	}
	b, err := os.ReadFile(path)
	if err != nil || fdev != dev {
		return 0, 0, false
	}
	n, err = strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	return pid, n, err == nil
}

// leak returns the unowned memory on dev left by earlier trials.
func (d stateDir) leak(dev int) uint64 {
	b, err := os.ReadFile(d.leakPath(dev))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// raiseLeak sets the leak on dev to at least n. Call it under lock.
func (d stateDir) raiseLeak(dev int, n uint64) error {
	if n <= d.leak(dev) {
		return nil
	}
	tmp := d.leakPath(dev) + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d\n", n), 0o600); err != nil {
		return fmt.Errorf("record simulated leak: %w", err)
	}
	if err := os.Rename(tmp, d.leakPath(dev)); err != nil {
		return fmt.Errorf("record simulated leak: %w", err)
	}
	return nil
}

// alive reports whether pid is a running process. A zombie (exited, not yet
// reaped by its parent) holds no GPU memory, so it counts as dead.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, err := procfs.ReadStat(pid)
	if err != nil {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return true // no procfs here: trust kill
		}
		return false // exited between the two checks
	}
	return !st.Dead()
}
