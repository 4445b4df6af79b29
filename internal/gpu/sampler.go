package gpu

import (
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchfit/batchfit/internal/procfs"
)

// Sampling intervals. An allocation spike shorter than one interval can be
// missed; 20 Hz is the slowest rate that still catches a training step's
// peak, so slower requests are raised to it.
const (
	DefaultInterval = 25 * time.Millisecond
	MaxInterval     = 50 * time.Millisecond
)

// How a Peak was measured.
const (
	// MethodProcess: NVML's per-process figures, summed over the trial's
	// process tree. Only the trial's own memory, CUDA contexts included.
	MethodProcess = "process"
	// MethodDeviceDelta: device used memory minus its value when the watch
	// started. Used when NVML lists none of the tree's processes (a
	// container with its own PID namespace, per-process figures not
	// available); it also counts anyone else's allocations on the GPU.
	MethodDeviceDelta = "device-delta"
)

// Peak is the most GPU memory a trial used while it was watched.
type Peak struct {
	// Bytes is the maximum over samples of the total over devices: the
	// peak of the sum, not the sum of per-device peaks.
	Bytes uint64 `json:"bytes"`
	// PerDevice is the maximum per device index; devices the trial never
	// used are absent.
	PerDevice map[int]uint64 `json:"per_device,omitempty"`
	// Samples counts the ticks in which the backend answered.
	Samples int `json:"samples"`
	// Method is MethodProcess, MethodDeviceDelta, or "" when nothing could
	// be measured (no backend, or every query failed).
	Method string `json:"method,omitempty"`
	// Foreign is the most memory that processes outside the trial held on
	// one of its devices at one sample, beyond what they held before the
	// search (Sampler.SetBaseline): another job that started, or grew,
	// while the trial ran. It is known only with MethodProcess: without
	// per-process figures the trial's memory and a stranger's look alike.
	Foreign uint64 `json:"foreign_bytes,omitempty"`
	// ForeignPIDs are the processes that held it, sorted.
	ForeignPIDs []int `json:"foreign_pids,omitempty"`
}

// Sampler measures the peak GPU memory of process trees. One Sampler serves
// many trials, one Watch each.
type Sampler struct {
	backend  Backend
	interval time.Duration
	stat     statFunc
	self     int          // batchfit's own pid: its descendants are never foreign
	holder   atomic.Int64 // the pid that holds memory for held trials (SetHolder); 0: none

	mu      sync.Mutex
	devices []int                  // device indexes, listed once
	before  map[int]map[int]uint64 // per device, what other processes held before the search
}

// NewSampler samples b every interval (DefaultInterval when zero or
// negative, at most MaxInterval). A nil b is allowed: watches then measure
// nothing and return an empty Peak, so callers need no special case when
// Detect found no GPU.
func NewSampler(b Backend, interval time.Duration) *Sampler {
	if interval <= 0 {
		interval = DefaultInterval
	}
	interval = min(interval, MaxInterval)
	return &Sampler{backend: b, interval: interval, stat: procfs.ReadStat, self: os.Getpid()}
}

// SetHolder names the process that holds GPU memory for trials on a held
// card (batchfit itself, internal/hold): what it holds is the search's
// own, never foreign. 0 names none.
func (s *Sampler) SetHolder(pid int) { s.holder.Store(int64(pid)) }

// SetBaseline tells the sampler what other processes held on each device
// before the search began (device index to pid to bytes), as checked and
// accepted then: a watch counts as foreign only memory beyond it. Call it
// before the first Start.
func (s *Sampler) SetBaseline(before map[int]map[int]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = before
}

func (s *Sampler) baselineOf(device int) map[int]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.before[device]
}

// deviceList lists the backend's devices, remembering a successful answer:
// the set of GPUs does not change while batchfit runs.
func (s *Sampler) deviceList() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.devices != nil || s.backend == nil {
		return s.devices
	}
	devs, err := s.backend.Devices()
	if err != nil {
		return nil
	}
	s.devices = make([]int, 0, len(devs))
	for _, d := range devs {
		s.devices = append(s.devices, d.Index)
	}
	return s.devices
}

// Watch samples the memory of one process tree until Stop. The tree is the
// root PID, every process in the process group the root leads (torchrun
// ranks, dataloader workers, even once re-parented), and their descendants.
// A process keeps its answer for as long as it lives, so one that was
// classified while linked to the tree stays in after its parent exits.
type Watch struct {
	s        *Sampler
	root     int
	devices  []int
	baseline map[int]uint64 // device used bytes at Start

	// Tree bookkeeping, touched only by the sampling goroutine (or by
	// Start before it runs).
	rootStart uint64             // the root's start time; 0 if unknown
	known     map[int]membership // answers by PID, valid while the start time matches
	kin       map[int]membership // for PIDs outside the tree: whether batchfit started them

	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	mu sync.Mutex
	st sampleState
}

// sampleState keeps both measurements side by side; which one is reported is
// decided at the end, because early ticks (before CUDA starts) look the same
// under both.
type sampleState struct {
	samples   int
	procSeen  bool // some tick found a tree process in NVML's lists
	procMax   uint64
	procPer   map[int]uint64
	deltaSeen bool // some tick read device used memory against a baseline
	deltaMax  uint64
	deltaPer  map[int]uint64
	// foreignMax is the most foreign memory on one device at one tick,
	// and foreignPIDs the processes that held it.
	foreignMax  uint64
	foreignPIDs []int
}

// Start begins watching the process tree rooted at pid on the given device
// indexes (nil: every device). Pass the trial's GPUs when trials run side by
// side, so the device-delta fallback does not count a neighbour's memory.
// Call it right after the process starts: the device baseline for the
// fallback is read now. It takes one sample before returning, so even a
// very short trial has one.
func (s *Sampler) Start(pid int, devices []int) *Watch {
	w := &Watch{
		s:        s,
		root:     pid,
		baseline: make(map[int]uint64),
		known:    make(map[int]membership),
		kin:      make(map[int]membership),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		st:       sampleState{procPer: make(map[int]uint64), deltaPer: make(map[int]uint64)},
	}
	w.devices = s.deviceList()
	if devices != nil {
		w.devices = slices.DeleteFunc(slices.Clone(w.devices), func(d int) bool { return !slices.Contains(devices, d) })
	}
	if len(w.devices) == 0 {
		close(w.done)
		return w
	}
	for _, d := range w.devices {
		if used, err := s.backend.UsedMemory(d); err == nil {
			w.baseline[d] = used
		}
	}
	if p, err := s.stat(pid); err == nil {
		w.rootStart = p.Start
	}
	w.sample()
	go w.loop()
	return w
}

func (w *Watch) loop() {
	defer close(w.done)
	t := time.NewTicker(w.s.interval)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
			w.sample()
		}
	}
}

// Stop ends the watch and returns the peak. It waits for the sampling
// goroutine to exit (at most the sample in progress); calling it again
// returns the same Peak.
func (w *Watch) Stop() Peak {
	w.stopOnce.Do(func() { close(w.quit) })
	<-w.done
	return w.Peak()
}

// Peak returns the peak so far; it may be called while the watch runs, e.g.
// to stop a trial that already exceeds a memory limit.
func (w *Watch) Peak() Peak {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := &w.st
	switch {
	case st.procSeen:
		return Peak{Bytes: st.procMax, PerDevice: maps.Clone(st.procPer), Samples: st.samples, Method: MethodProcess,
			Foreign: st.foreignMax, ForeignPIDs: slices.Clone(st.foreignPIDs)}
	case st.deltaSeen:
		return Peak{Bytes: st.deltaMax, PerDevice: maps.Clone(st.deltaPer), Samples: st.samples, Method: MethodDeviceDelta}
	default:
		return Peak{Samples: st.samples}
	}
}

// reading is one sample of every device: the memory of the watched tree's
// processes, the most any single device's strangers gained since the
// baseline, and the devices' used memory above it.
type reading struct {
	matched     bool // a process of the tree was on a device
	procPer     map[int]uint64
	procSum     uint64
	foreign     uint64
	foreignPIDs []int
	deltaOK     bool // a device answered its used memory
	deltaPer    map[int]uint64
	deltaSum    uint64
}

// sample takes one reading of every device.
func (w *Watch) sample() {
	r := reading{procPer: map[int]uint64{}, deltaPer: map[int]uint64{}}
	answered := w.readProcesses(&r)
	answered = w.readUsed(&r) || answered
	if !answered {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	st := &w.st
	st.samples++
	if r.matched {
		st.procSeen = true
		st.procMax = max(st.procMax, r.procSum)
		mergeMax(st.procPer, r.procPer)
	}
	if r.foreign > st.foreignMax {
		slices.Sort(r.foreignPIDs)
		st.foreignMax, st.foreignPIDs = r.foreign, r.foreignPIDs
	}
	if r.deltaOK {
		st.deltaSeen = true
		st.deltaMax = max(st.deltaMax, r.deltaSum)
		mergeMax(st.deltaPer, r.deltaPer)
	}
}

// readProcesses reads each device's process list into r: the tree's
// memory, and what processes outside it (not batchfit's) gained. It
// returns whether any device answered.
func (w *Watch) readProcesses(r *reading) bool {
	answered := false
	inTree := make(map[int]bool)
	for _, d := range w.devices {
		m, err := w.s.backend.ProcessMemory(d)
		if err != nil {
			continue
		}
		answered = true
		before := w.s.baselineOf(d)
		var devForeign uint64
		var devPIDs []int
		for pid, n := range m {
			in, ok := inTree[pid]
			if !ok {
				in = w.member(pid)
				inTree[pid] = in
			}
			switch {
			case in:
				r.matched = true
				r.procPer[d] += n
				r.procSum += n
			case n > before[pid] && !w.ours(pid):
				devForeign += n - before[pid]
				devPIDs = append(devPIDs, pid)
			}
		}
		if devForeign > r.foreign {
			r.foreign, r.foreignPIDs = devForeign, devPIDs
		}
	}
	return answered
}

// readUsed reads each device's used memory above its baseline into r. It
// returns whether any device answered.
func (w *Watch) readUsed(r *reading) bool {
	for _, d := range w.devices {
		base, ok := w.baseline[d]
		if !ok {
			continue
		}
		used, err := w.s.backend.UsedMemory(d)
		if err != nil {
			continue
		}
		r.deltaOK = true
		if used > base {
			r.deltaPer[d] = used - base
			r.deltaSum += used - base
		}
	}
	return r.deltaOK
}

func mergeMax(dst, src map[int]uint64) {
	for k, v := range src {
		if v > dst[k] {
			dst[k] = v
		}
	}
}

// membership is a remembered answer: whether the process that had this PID
// and start time is in the tree.
type membership struct {
	start  uint64
	member bool
}

// maxDepth bounds the walk up the parent chain, which a PID reused in the
// middle of a walk could otherwise make long.
const maxDepth = 512

// member says whether pid is in the watched tree: it, or an ancestor, is the
// root or in the root's process group. It reads the parent chain upward
// from pid, stopping at the first process whose answer is known, and
// remembers what it learned. Without a process table (no /proc) only the
// root is in the tree.
func (w *Watch) member(pid int) bool {
	p, err := w.s.stat(pid)
	if err != nil {
		return pid == w.root
	}
	type link struct {
		pid   int
		start uint64
	}
	var chain []link
	member, decided := false, false
	for cur := pid; len(chain) < maxDepth; {
		if k, ok := w.known[cur]; ok && k.start == p.Start {
			member, decided = k.member, true
			break
		}
		chain = append(chain, link{cur, p.Start})
		if cur == w.root {
			// A different start time: the root exited and its PID was
			// reused by a stranger.
			member, decided = w.rootStart == 0 || p.Start == w.rootStart, true
			break
		}
		if p.PGRP == w.root {
			// A PID cannot be reused while a group it leads exists, so
			// this group is the root's even after the root exits.
			member, decided = true, true
			break
		}
		if p.PPID <= 1 {
			decided = true // reached init (or the kernel): not ours
			break
		}
		cur = p.PPID
		if p, err = w.s.stat(cur); err != nil {
			// The parent exited mid-walk; its child is re-parented by
			// now. Decide on a later tick.
			break
		}
	}
	if decided {
		for _, l := range chain {
			w.known[l.pid] = membership{start: l.start, member: member}
		}
	}
	return member
}

// ours says whether pid, outside the watched tree, descends from batchfit
// itself (a neighbouring trial of the same search, a warm worker), or is
// the holder of a held card (SetHolder): such memory is the search's own,
// not a stranger's. It walks the parent chain and remembers the answer for
// the PID's lifetime.
func (w *Watch) ours(pid int) bool {
	if h := w.s.holder.Load(); h != 0 && int(h) == pid {
		return true
	}
	p, err := w.s.stat(pid)
	if err != nil {
		return false // not visible here: another PID namespace, or gone
	}
	if k, ok := w.kin[pid]; ok && k.start == p.Start {
		return k.member
	}
	mine := false
	for cur, depth := p, 0; depth < maxDepth; depth++ {
		if cur.PPID == w.s.self {
			mine = true
			break
		}
		if cur.PPID <= 1 {
			break
		}
		if cur, err = w.s.stat(cur.PPID); err != nil {
			break
		}
	}
	w.kin[pid] = membership{start: p.Start, member: mine}
	return mine
}
