package runner

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/batchfit/batchfit/internal/claim"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/units"
)

// BusyThreshold is how much memory other processes may hold on a GPU, in
// all, before a search on the whole card is refused. Every process that has
// started CUDA holds a context of 300 MiB to 1 GiB, so any other training
// job, notebook or inference server is above it; a desktop's display server
// and compositor usually hold less. It is under 1 % of a 24 GiB card and
// 0.3 % of an 80 GiB one: below it the answer can be low by a sample or two
// of a typical workload, no more. Where a display server holds more, pass
// --memory-limit (then only the room it leaves matters) or --allow-busy-gpu.
const BusyThreshold uint64 = 256 << 20

// contextHeadroom is what a trial needs on the card beyond --memory-limit:
// the CUDA context and the memory the allocator's cap does not count.
const contextHeadroom uint64 = 1 << 30

// tooBusy says whether others holding held bytes on a card of total bytes
// spoil a search: on the whole card any memory they hold above
// BusyThreshold lowers the answer; under --memory-limit (limit > 0) only
// whether they leave the limit and a context's headroom free.
func tooBusy(total, held, limit uint64) bool {
	if limit == 0 {
		return held > BusyThreshold
	}
	return held > total || total-held < limit+contextHeadroom
}

// foreignLimit is how much memory a process that appears during a trial
// may take before the trial is run again: BusyThreshold on the whole card;
// under --memory-limit whatever still leaves the limit and the headroom
// free on the fullest GPU for each of the perGPU trials that run side by
// side on it, and never less than BusyThreshold.
func foreignLimit(devices []gpu.Device, held map[int]uint64, limit uint64, perGPU int) uint64 {
	if limit == 0 {
		return BusyThreshold
	}
	room := uint64(0)
	for i, d := range devices {
		var free uint64
		if need := held[d.Index] + uint64(max(perGPU, 1))*(limit+contextHeadroom); need < d.Total {
			free = d.Total - need
		}
		if i == 0 || free < room {
			room = free
		}
	}
	return max(room, BusyThreshold)
}

// gpuUse is what others hold on one GPU before the search.
type gpuUse struct {
	device gpu.Device
	procs  map[int]uint64 // nil when the driver lists no processes here
	held   uint64         // the sum of procs, or the device's used memory
}

// lines describes the use, one line per process.
func (u gpuUse) lines() []string {
	at := fmt.Sprintf("gpu %d (%s)", u.device.Index, u.device.Name)
	if u.procs == nil {
		return []string{fmt.Sprintf("%s: %s in use (a device-wide figure: the driver lists no processes here)", at, units.Bytes(u.held))}
	}
	pids := slices.Sorted(maps.Keys(u.procs))
	out := make([]string, len(pids))
	for i, pid := range pids {
		out[i] = fmt.Sprintf("%s: pid %d (%s) holds %s", at, pid, procfs.Name(pid), units.Bytes(u.procs[pid]))
	}
	return out
}

// checkGPUs looks, before the first trial, at who else uses the search's
// GPUs: other searches, which claim them (internal/claim), and other
// processes holding memory. It refuses the search when they would make its
// answer low, unless --allow-busy-gpu, which records them as warnings
// instead. It gives the sampler what it found, so that only what changes
// later is foreign.
func (s *session) checkGPUs(sampler *gpu.Sampler) error {
	devices := s.cfg.Group.Devices
	if len(devices) == 0 {
		return nil // no driver: nothing to check, nothing sampled
	}
	var problems []string
	if p := s.claimGPUs(devices); p != "" {
		problems = append(problems, p)
	}
	busy, before, held := s.strangers(devices)
	for _, u := range busy {
		msg := fmt.Sprintf("gpu %d (%s) is in use: other processes hold %s", u.device.Index, u.device.Name, units.Bytes(u.held))
		if s.limit > 0 {
			msg += fmt.Sprintf(", which leaves less than --memory-limit %s and %s for a CUDA context free",
				units.Bytes(s.limit), units.Bytes(contextHeadroom))
		}
		problems = append(problems, msg)
	}
	sampler.SetBaseline(before)
	s.held = held
	if len(problems) == 0 {
		return nil
	}
	var holders []string
	for _, u := range busy {
		holders = append(holders, u.lines()...)
	}
	if s.cfg.AllowBusyGPU {
		// Shown and recorded in the same words, so that the display, which
		// shows a run's warnings that it has not shown yet, shows each once.
		for i, p := range problems {
			problems[i] = p + " (--allow-busy-gpu: the answer may be low)"
		}
		for _, w := range append(problems, holders...) {
			s.deps.Alert("warning: " + w)
			s.run.Warnings = append(s.run.Warnings, w)
		}
		return nil
	}
	for _, l := range append(holders, problems[1:]...) {
		s.deps.Alert(l)
	}
	fix := "wait for it to finish, or run on another GPU (--gpus); --allow-busy-gpu searches anyway"
	if len(busy) > 0 {
		fix = "wait for them to finish, or run on another GPU (--gpus); --allow-busy-gpu searches anyway, and the answer may be low"
		if s.limit == 0 {
			fix += "\n--memory-limit searches within a share of the card that the others leave free"
		}
	}
	return hint.With(&BusyGPUError{msg: problems[0]}, fix)
}

// claimGPUs claims devices for the run, in one step that no other search
// can split: of two searches started together on a GPU, one gets it and
// the other is refused here. It returns the problem when another search
// holds one ("" when the claim is taken, or cannot be: a warning says so,
// and the search goes on unguarded rather than not at all).
func (s *session) claimGPUs(devices []gpu.Device) string {
	c, err := s.deps.Claims.Take(devices, claim.Holder{PID: os.Getpid(), Command: s.run.Command})
	var held *claim.HeldError
	switch {
	case errors.As(err, &held):
		h := held.Holder
		msg := "another search is running on the same GPU"
		switch {
		case h.Run != "":
			msg += fmt.Sprintf(": run %s by batchfit (pid %d): %s", h.Run, h.PID, strings.Join(h.Command, " "))
		case h.PID > 0:
			msg += fmt.Sprintf(": batchfit (pid %d): %s", h.PID, strings.Join(h.Command, " "))
		}
		return msg
	case err != nil:
		s.deps.Alert(fmt.Sprintf("warning: %v; another search could start on the same GPU", err))
		return ""
	}
	s.claim = c
	return ""
}

// strangers reads what other processes hold on each device: the devices
// they make too busy (the others are noted), each device's processes
// (the sampler's baseline) and the memory held on each.
func (s *session) strangers(devices []gpu.Device) (busy []gpuUse, before map[int]map[int]uint64, held map[int]uint64) {
	before = make(map[int]map[int]uint64, len(devices))
	held = make(map[int]uint64, len(devices))
	for _, d := range devices {
		u := gpuUse{device: d}
		if procs, err := s.deps.GPU.ProcessMemory(d.Index); err == nil {
			u.procs = procs
			for _, n := range procs {
				u.held += n
			}
			before[d.Index] = procs
		} else if used, err := s.deps.GPU.UsedMemory(d.Index); err == nil {
			u.held = used
		} else {
			continue // nothing known about this GPU
		}
		held[d.Index] = u.held
		if u.held == 0 {
			continue
		}
		if tooBusy(d.Total, u.held, s.limit) {
			busy = append(busy, u)
			continue
		}
		for _, l := range u.lines() {
			s.deps.Notice("note: " + l)
		}
	}
	return busy, before, held
}

// BusyGPUError is a search refused because others use its GPUs: processes
// holding memory there, or another search under way.
type BusyGPUError struct{ msg string }

func (e *BusyGPUError) Error() string { return e.msg }
