package gpu

import (
	"maps"
	"slices"
	"sync"
	"time"
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
}

// Sampler measures the peak GPU memory of process trees. One Sampler serves
// many trials, one Watch each.
type Sampler struct {
	backend  Backend
	interval time.Duration
	procs    listProcs

	mu      sync.Mutex
	devices []int // device indexes, listed once
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
	return &Sampler{backend: b, interval: interval, procs: readProcs}
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
// ranks, dataloader workers, even once re-parented), their descendants, and
// any process once seen in the tree for as long as it lives.
type Watch struct {
	s        *Sampler
	root     int
	devices  []int
	baseline map[int]uint64 // device used bytes at Start

	// Tree bookkeeping, touched only by the sampling goroutine (or by
	// Start before it runs).
	rootStart uint64
	members   map[int]uint64 // pid → start time

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
		members:  make(map[int]uint64),
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
		return Peak{Bytes: st.procMax, PerDevice: maps.Clone(st.procPer), Samples: st.samples, Method: MethodProcess}
	case st.deltaSeen:
		return Peak{Bytes: st.deltaMax, PerDevice: maps.Clone(st.deltaPer), Samples: st.samples, Method: MethodDeviceDelta}
	default:
		return Peak{Samples: st.samples}
	}
}

// sample takes one reading of every device. The process table is walked
// only when some device lists a process, and at most once.
func (w *Watch) sample() {
	b := w.s.backend
	answered := false
	lists := make(map[int]map[int]uint64, len(w.devices))
	anyProcs := false
	for _, d := range w.devices {
		m, err := b.ProcessMemory(d)
		if err != nil {
			continue
		}
		answered = true
		lists[d] = m
		anyProcs = anyProcs || len(m) > 0
	}

	matched := false
	procPer := make(map[int]uint64, len(w.devices))
	var procSum uint64
	if anyProcs {
		tree := w.tree()
		for d, m := range lists {
			for pid, n := range m {
				if tree[pid] {
					matched = true
					procPer[d] += n
					procSum += n
				}
			}
		}
	}

	deltaOK := false
	deltaPer := make(map[int]uint64, len(w.devices))
	var deltaSum uint64
	for _, d := range w.devices {
		base, ok := w.baseline[d]
		if !ok {
			continue
		}
		used, err := b.UsedMemory(d)
		if err != nil {
			continue
		}
		answered, deltaOK = true, true
		if used > base {
			deltaPer[d] = used - base
			deltaSum += used - base
		}
	}

	if !answered {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	st := &w.st
	st.samples++
	if matched {
		st.procSeen = true
		st.procMax = max(st.procMax, procSum)
		mergeMax(st.procPer, procPer)
	}
	if deltaOK {
		st.deltaSeen = true
		st.deltaMax = max(st.deltaMax, deltaSum)
		mergeMax(st.deltaPer, deltaPer)
	}
}

func mergeMax(dst, src map[int]uint64) {
	for k, v := range src {
		if v > dst[k] {
			dst[k] = v
		}
	}
}

// tree returns the PIDs of the watched process tree. Without a process table
// (no /proc) it is the root alone.
func (w *Watch) tree() map[int]bool {
	procs, err := w.s.procs()
	if err != nil {
		return map[int]bool{w.root: true}
	}
	// Forget members that exited, or whose PID now names another process.
	for pid, start := range w.members {
		if p, ok := procs[pid]; !ok || p.start != start {
			delete(w.members, pid)
		}
	}
	children := make(map[int][]int, len(procs))
	var queue []int
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
		switch {
		case pid == w.root:
			if w.rootStart == 0 {
				w.rootStart = p.start
			}
			if p.start == w.rootStart {
				queue = append(queue, pid)
			}
		case p.pgid == w.root:
			// A PID cannot be reused while a group it leads exists, so
			// this group is the root's even after the root exits.
			queue = append(queue, pid)
		}
	}
	for pid := range w.members {
		queue = append(queue, pid)
	}
	in := make(map[int]bool, len(queue))
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if in[pid] {
			continue
		}
		in[pid] = true
		queue = append(queue, children[pid]...)
	}
	for pid := range in {
		w.members[pid] = procs[pid].start
	}
	return in
}
