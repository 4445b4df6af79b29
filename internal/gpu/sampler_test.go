package gpu

import (
	"errors"
	"maps"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/procfs"
)

// fakeBackend answers with whatever its funcs say; nil funcs fail.
type fakeBackend struct {
	DevicesFunc       func() ([]Device, error)
	ProcessMemoryFunc func(device int) (map[int]uint64, error)
	UsedMemoryFunc    func(device int) (uint64, error)
}

var _ Backend = (*fakeBackend)(nil)

var errFake = errors.New("fake failure")

func (f *fakeBackend) Devices() ([]Device, error) {
	if f.DevicesFunc == nil {
		return nil, errFake
	}
	return f.DevicesFunc()
}

func (f *fakeBackend) ProcessMemory(device int) (map[int]uint64, error) {
	if f.ProcessMemoryFunc == nil {
		return nil, errFake
	}
	return f.ProcessMemoryFunc(device)
}

func (f *fakeBackend) UsedMemory(device int) (uint64, error) {
	if f.UsedMemoryFunc == nil {
		return 0, errFake
	}
	return f.UsedMemoryFunc(device)
}

func (f *fakeBackend) Close() error { return nil }

func devices(n int) func() ([]Device, error) {
	return func() ([]Device, error) {
		ds := make([]Device, n)
		for i := range ds {
			ds[i] = Device{Index: i, Name: "fake", Total: 80 << 30}
		}
		return ds, nil
	}
}

// fakeStat is a process table that does not change.
func fakeStat(m map[int]procfs.Stat) statFunc {
	return func(pid int) (procfs.Stat, error) {
		p, ok := m[pid]
		if !ok {
			return procfs.Stat{}, errFake
		}
		return p, nil
	}
}

// tick is what the fake GPUs show at one sample: per device, the process
// list and the device's used bytes.
type tick struct {
	procs map[int]map[int]uint64
	used  map[int]uint64
}

// scripted is a backend that plays ticks in order. Its first tick is what
// Start reads as the baseline; each sample that follows advances one tick.
// ProcessMemory is read before UsedMemory in a sample, so the tick advances
// on the first device's process query.
type scripted struct {
	fakeBackend
	ticks []tick
	i     int
}

func newScripted(ndev int, ticks ...tick) *scripted {
	s := &scripted{ticks: ticks}
	s.DevicesFunc = devices(ndev)
	s.ProcessMemoryFunc = func(d int) (map[int]uint64, error) {
		if d == 0 {
			s.i++
		}
		m, ok := s.ticks[s.i].procs[d]
		if !ok {
			return nil, errFake
		}
		return m, nil
	}
	s.UsedMemoryFunc = func(d int) (uint64, error) {
		u, ok := s.ticks[s.i].used[d]
		if !ok {
			return 0, errFake
		}
		return u, nil
	}
	return s
}

// runTicks starts a watch and drives every scripted tick by hand, without
// the ticker, so results do not depend on timing.
func runTicks(t *testing.T, b *scripted, tree map[int]procfs.Stat, root int) Peak {
	t.Helper()
	s := NewSampler(b, 0)
	s.stat = fakeStat(tree)
	w := newTestWatch(s, root)
	for b.i < len(b.ticks)-1 {
		w.sample()
	}
	return w.Peak()
}

// newTestWatch is Start without the first sample and the goroutine.
func newTestWatch(s *Sampler, root int) *Watch {
	w := &Watch{
		s: s, root: root, devices: s.deviceList(),
		baseline: map[int]uint64{}, known: map[int]membership{}, kin: map[int]membership{},
		st: sampleState{procPer: map[int]uint64{}, deltaPer: map[int]uint64{}},
	}
	for _, d := range w.devices {
		if u, err := s.backend.UsedMemory(d); err == nil {
			w.baseline[d] = u
		}
	}
	if p, err := s.stat(root); err == nil {
		w.rootStart = p.Start
	}
	return w
}

// The trial: root 100 with a child 101 and a grandchild 102; 200 is someone
// else's job.
var simpleTree = map[int]procfs.Stat{
	100: {PPID: 1, PGRP: 100},
	101: {PPID: 100, PGRP: 100},
	102: {PPID: 101, PGRP: 100},
	200: {PPID: 1, PGRP: 200},
}

func TestSamplerPeak(t *testing.T) {
	const G = 1 << 30
	tests := []struct {
		name  string
		ndev  int
		ticks []tick
		want  Peak
	}{
		{
			name: "peak of the sum, not sum of the peaks",
			ndev: 2,
			ticks: []tick{
				{used: map[int]uint64{0: 1 * G, 1: 1 * G}},
				{procs: map[int]map[int]uint64{0: {100: 10 * G}, 1: {101: 2 * G}}, used: map[int]uint64{0: 11 * G, 1: 3 * G}},
				{procs: map[int]map[int]uint64{0: {100: 2 * G}, 1: {101: 10 * G}}, used: map[int]uint64{0: 3 * G, 1: 11 * G}},
			},
			want: Peak{Bytes: 12 * G, PerDevice: map[int]uint64{0: 10 * G, 1: 10 * G}, Samples: 2, Method: MethodProcess},
		},
		{
			name: "only the tree counts",
			ndev: 1,
			ticks: []tick{
				{used: map[int]uint64{0: 0}},
				{procs: map[int]map[int]uint64{0: {100: 1 * G, 101: 2 * G, 102: 3 * G, 200: 40 * G}}, used: map[int]uint64{0: 46 * G}},
			},
			want: Peak{Bytes: 6 * G, PerDevice: map[int]uint64{0: 6 * G}, Samples: 1, Method: MethodProcess},
		},
		{
			name: "device delta when NVML lists no processes",
			ndev: 2,
			ticks: []tick{
				{used: map[int]uint64{0: 1 * G, 1: 2 * G}},
				{procs: map[int]map[int]uint64{0: {}, 1: {}}, used: map[int]uint64{0: 5 * G, 1: 2 * G}},
				{procs: map[int]map[int]uint64{0: {}, 1: {}}, used: map[int]uint64{0: 4 * G, 1: 4 * G}},
				// Below the baseline (someone else freed memory): zero, not a wrap-around.
				{procs: map[int]map[int]uint64{0: {}, 1: {}}, used: map[int]uint64{0: 0, 1: 2 * G}},
			},
			want: Peak{Bytes: 5 * G, PerDevice: map[int]uint64{0: 4 * G, 1: 2 * G}, Samples: 3, Method: MethodDeviceDelta},
		},
		{
			name: "device delta when NVML lists only foreign pids (another PID namespace)",
			ndev: 1,
			ticks: []tick{
				{used: map[int]uint64{0: 1 * G}},
				{procs: map[int]map[int]uint64{0: {777001: 8 * G}}, used: map[int]uint64{0: 9 * G}},
			},
			want: Peak{Bytes: 8 * G, PerDevice: map[int]uint64{0: 8 * G}, Samples: 1, Method: MethodDeviceDelta},
		},
		{
			name: "process figures win once seen, even if the early delta was larger",
			ndev: 1,
			ticks: []tick{
				{used: map[int]uint64{0: 0}},
				{procs: map[int]map[int]uint64{0: {}}, used: map[int]uint64{0: 20 * G}},
				{procs: map[int]map[int]uint64{0: {100: 5 * G}}, used: map[int]uint64{0: 25 * G}},
			},
			want: Peak{Bytes: 5 * G, PerDevice: map[int]uint64{0: 5 * G}, Samples: 2, Method: MethodProcess},
		},
		{
			name: "a failing device is skipped",
			ndev: 2,
			ticks: []tick{
				{used: map[int]uint64{0: 0}},
				{procs: map[int]map[int]uint64{0: {100: 3 * G}}, used: map[int]uint64{0: 3 * G}},
			},
			want: Peak{Bytes: 3 * G, PerDevice: map[int]uint64{0: 3 * G}, Samples: 1, Method: MethodProcess},
		},
		{
			name: "nothing answers",
			ndev: 1,
			ticks: []tick{
				{},
				{},
			},
			want: Peak{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runTicks(t, newScripted(tt.ndev, tt.ticks...), simpleTree, 100)
			if !peakEqual(got, tt.want) {
				t.Errorf("peak = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func peakEqual(a, b Peak) bool {
	return a.Bytes == b.Bytes && a.Samples == b.Samples && a.Method == b.Method &&
		maps.Equal(a.PerDevice, b.PerDevice)
}

func TestSamplerTree(t *testing.T) {
	tests := []struct {
		name  string
		ticks []map[int]procfs.Stat // the process table at each tick
		root  int
		want  []map[int]bool // the tree found at each tick
	}{
		{
			name:  "descendants, not the rest",
			ticks: []map[int]procfs.Stat{simpleTree},
			root:  100,
			want:  []map[int]bool{{100: true, 101: true, 102: true}},
		},
		{
			name: "the root's process group, even re-parented, with its children",
			ticks: []map[int]procfs.Stat{{
				100: {PPID: 50, PGRP: 100},
				300: {PPID: 1, PGRP: 100}, // an orphaned dataloader worker
				301: {PPID: 300, PGRP: 301},
				200: {PPID: 1, PGRP: 200},
			}},
			root: 100,
			want: []map[int]bool{{100: true, 300: true, 301: true}},
		},
		{
			name: "a root that leads no group brings in no group",
			ticks: []map[int]procfs.Stat{{
				100: {PPID: 50, PGRP: 50},
				50:  {PPID: 1, PGRP: 50},
				51:  {PPID: 1, PGRP: 50},
			}},
			root: 100,
			want: []map[int]bool{{100: true}},
		},
		{
			name: "members are remembered after their parent exits, until their pid is reused",
			ticks: []map[int]procfs.Stat{
				{
					100: {PPID: 1, PGRP: 100, Start: 10},
					101: {PPID: 100, PGRP: 101, Start: 11}, // setsid: its own group
					102: {PPID: 101, PGRP: 101, Start: 12},
				},
				{
					// 100 and 101 exited; 102 is re-parented to init.
					102: {PPID: 1, PGRP: 101, Start: 12},
				},
				{
					// 102 exited and its pid went to an unrelated process;
					// 100 likewise.
					100: {PPID: 1, PGRP: 100, Start: 90},
					102: {PPID: 1, PGRP: 102, Start: 99},
				},
			},
			root: 100,
			want: []map[int]bool{
				{100: true, 101: true, 102: true},
				{102: true},
				{},
			},
		},
		{
			name: "a chain broken by an exit is not remembered",
			ticks: []map[int]procfs.Stat{
				{
					100: {PPID: 1, PGRP: 100, Start: 10},
					102: {PPID: 101, PGRP: 102, Start: 12}, // 101 just exited
				},
				{
					// The root is a subreaper and adopted 102.
					100: {PPID: 1, PGRP: 100, Start: 10},
					102: {PPID: 100, PGRP: 102, Start: 12},
				},
			},
			root: 100,
			want: []map[int]bool{
				{100: true},
				{100: true, 102: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := 0
			s := NewSampler(nil, 0)
			s.stat = func(pid int) (procfs.Stat, error) { return fakeStat(tt.ticks[i])(pid) }
			w := newTestWatch(s, tt.root)
			for i = range tt.ticks {
				got := map[int]bool{}
				for pid := range tt.ticks[i] {
					if w.member(pid) {
						got[pid] = true
					}
				}
				if !maps.Equal(got, tt.want[i]) {
					t.Errorf("tick %d: tree = %v, want %v", i, got, tt.want[i])
				}
			}
		})
	}
}

func TestSamplerTreeWithoutProc(t *testing.T) {
	s := NewSampler(nil, 0)
	s.stat = func(int) (procfs.Stat, error) { return procfs.Stat{}, errFake }
	w := newTestWatch(s, 7)
	if !w.member(7) || w.member(8) {
		t.Errorf("member(7), member(8) = %v, %v; want the root alone", w.member(7), w.member(8))
	}
}

func TestSamplerNilBackend(t *testing.T) {
	got := NewSampler(nil, 0).Start(1, nil).Stop()
	if !peakEqual(got, Peak{}) {
		t.Errorf("peak = %+v, want empty", got)
	}
}

func TestSamplerNoDevices(t *testing.T) {
	b := &fakeBackend{DevicesFunc: devices(0)}
	got := NewSampler(b, 0).Start(1, nil).Stop()
	if !peakEqual(got, Peak{}) {
		t.Errorf("peak = %+v, want empty", got)
	}
}

func TestNewSamplerInterval(t *testing.T) {
	for _, tt := range []struct{ in, want time.Duration }{
		{0, DefaultInterval},
		{-time.Second, DefaultInterval},
		{10 * time.Millisecond, 10 * time.Millisecond},
		{time.Second, MaxInterval},
	} {
		if got := NewSampler(nil, tt.in).interval; got != tt.want {
			t.Errorf("NewSampler(nil, %v).interval = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// countingBackend reports a growing figure for pid 100 and signals every
// ProcessMemory call, so a test can wait for the ticker without sleeping.
type countingBackend struct {
	fakeBackend
	mu    sync.Mutex
	n     uint64
	calls chan struct{}
}

func newCountingBackend() *countingBackend {
	b := &countingBackend{calls: make(chan struct{}, 100)}
	b.DevicesFunc = devices(1)
	b.UsedMemoryFunc = func(int) (uint64, error) { return 0, nil }
	b.ProcessMemoryFunc = func(int) (map[int]uint64, error) {
		b.mu.Lock()
		b.n++
		n := b.n
		b.mu.Unlock()
		select {
		case b.calls <- struct{}{}:
		default:
		}
		return map[int]uint64{100: n << 20}, nil
	}
	return b
}

func TestWatchSamplesUntilStop(t *testing.T) {
	b := newCountingBackend()
	s := NewSampler(b, time.Millisecond)
	s.stat = fakeStat(simpleTree)
	w := s.Start(100, nil)
	for range 5 {
		<-b.calls
	}
	if live := w.Peak(); live.Method != MethodProcess || live.Samples < 1 {
		t.Errorf("live peak = %+v, want samples by process", live)
	}
	got := w.Stop()
	if got.Samples < 4 || got.Method != MethodProcess {
		t.Errorf("peak = %+v, want at least 4 samples by process", got)
	}
	b.mu.Lock()
	calls := b.n
	b.mu.Unlock()
	// Every sample saw a larger figure than the last, so the peak is the last one.
	if got.Bytes != calls<<20 || uint64(got.Samples) != calls {
		t.Errorf("peak = %+v after %d samples, want %d bytes", got, calls, calls<<20)
	}
	if again := w.Stop(); !peakEqual(again, got) {
		t.Errorf("second Stop = %+v, want %+v", again, got)
	}
}

func TestWatchStartSamplesOnce(t *testing.T) {
	b := newCountingBackend()
	s := NewSampler(b, MaxInterval)
	s.stat = fakeStat(simpleTree)
	w := s.Start(100, nil)
	if got := w.Peak(); got.Samples < 1 || got.Bytes == 0 {
		t.Errorf("peak right after Start = %+v, want the first sample", got)
	}
	w.Stop()
}

func TestWatchNoGoroutineLeak(t *testing.T) {
	b := newCountingBackend()
	s := NewSampler(b, time.Millisecond)
	s.stat = fakeStat(simpleTree)
	before := runtime.NumGoroutine()
	for range 50 {
		s.Start(100, nil).Stop()
	}
	// A goroutine that closed its done channel may not have returned yet;
	// give the scheduler a moment, but the count has to come back.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines before 50 watches, %d after", before, after)
	}
}

// Trials side by side on different GPUs: each watch counts its own devices
// only, so a neighbour's memory stays out of the device-delta fallback.
func TestWatchOnlyItsDevices(t *testing.T) {
	const G = 1 << 30
	var mu sync.Mutex
	used := map[int]uint64{0: 1 * G, 1: 1 * G, 2: 1 * G}
	b := &fakeBackend{
		DevicesFunc:       devices(3),
		ProcessMemoryFunc: func(int) (map[int]uint64, error) { return map[int]uint64{}, nil },
		UsedMemoryFunc: func(d int) (uint64, error) {
			mu.Lock()
			defer mu.Unlock()
			return used[d], nil
		},
	}
	s := NewSampler(b, time.Millisecond)
	w := s.Start(100, []int{1, 7})
	mu.Lock()
	used[0], used[1] = 30*G, 5*G // the neighbour on gpu 0 grows; ours on gpu 1
	mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); w.Peak().Bytes == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	got := w.Stop()
	want := Peak{Bytes: 4 * G, PerDevice: map[int]uint64{1: 4 * G}, Samples: got.Samples, Method: MethodDeviceDelta}
	if !peakEqual(got, want) || got.Samples < 2 {
		t.Errorf("peak = %+v, want %+v", got, want)
	}
}

func TestSamplerForeign(t *testing.T) {
	const G = 1 << 30
	tree := maps.Clone(simpleTree)
	tree[300] = procfs.Stat{PPID: 1, PGRP: 300}           // a job that was there before the search
	tree[400] = procfs.Stat{PPID: os.Getpid(), PGRP: 400} // batchfit's own (a neighbouring trial)
	tests := []struct {
		name    string
		before  map[int]map[int]uint64
		ticks   []tick
		foreign uint64
		pids    []int
	}{
		{
			name: "a stranger appears mid-trial",
			ticks: []tick{
				{used: map[int]uint64{0: 0}},
				{procs: map[int]map[int]uint64{0: {100: 2 * G}}, used: map[int]uint64{0: 2 * G}},
				{procs: map[int]map[int]uint64{0: {100: 3 * G, 200: 5 * G}}, used: map[int]uint64{0: 8 * G}},
				{procs: map[int]map[int]uint64{0: {100: 3 * G}}, used: map[int]uint64{0: 3 * G}},
			},
			foreign: 5 * G, pids: []int{200},
		},
		{
			name:   "a process there before counts only for what it gained",
			before: map[int]map[int]uint64{0: {300: 1 * G}},
			ticks: []tick{
				{used: map[int]uint64{0: 1 * G}},
				{procs: map[int]map[int]uint64{0: {100: 2 * G, 300: 1 * G}}, used: map[int]uint64{0: 3 * G}},
				{procs: map[int]map[int]uint64{0: {100: 2 * G, 300: 3 * G}}, used: map[int]uint64{0: 5 * G}},
			},
			foreign: 2 * G, pids: []int{300},
		},
		{
			name:   "nothing new",
			before: map[int]map[int]uint64{0: {300: 1 * G}},
			ticks: []tick{
				{used: map[int]uint64{0: 1 * G}},
				{procs: map[int]map[int]uint64{0: {100: 2 * G, 300: 1 * G, 400: 4 * G}}, used: map[int]uint64{0: 7 * G}},
			},
		},
		{
			name: "the most on one device at one tick",
			ticks: []tick{
				{used: map[int]uint64{0: 0, 1: 0}},
				{procs: map[int]map[int]uint64{0: {100: 1 * G, 200: 1 * G}, 1: {300: 2 * G}}, used: map[int]uint64{0: 2 * G, 1: 2 * G}},
				{procs: map[int]map[int]uint64{0: {100: 1 * G}, 1: {}}, used: map[int]uint64{0: 1 * G, 1: 0}},
			},
			foreign: 2 * G, pids: []int{300},
		},
		{
			name: "unknown without the trial's own figures",
			ticks: []tick{
				{used: map[int]uint64{0: 0}},
				{procs: map[int]map[int]uint64{0: {200: 5 * G}}, used: map[int]uint64{0: 5 * G}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ndev := 1
			if len(tt.ticks[0].used) > 1 {
				ndev = len(tt.ticks[0].used)
			}
			b := newScripted(ndev, tt.ticks...)
			s := NewSampler(b, 0)
			s.stat = fakeStat(tree)
			s.SetBaseline(tt.before)
			w := newTestWatch(s, 100)
			for b.i < len(b.ticks)-1 {
				w.sample()
			}
			got := w.Peak()
			if got.Foreign != tt.foreign || !slices.Equal(got.ForeignPIDs, tt.pids) {
				t.Errorf("foreign %d by %v, want %d by %v", got.Foreign, got.ForeignPIDs, tt.foreign, tt.pids)
			}
		})
	}
}
