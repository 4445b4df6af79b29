package probe

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hold"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/sim"
)

// heldProber runs the simulated workload under a 24 GiB whole-process
// limit on an 80 GiB card that the simulator can hold.
func heldProber(t *testing.T) (*Prober, sim.Card, sim.Workload) {
	t.Helper()
	card, w := heldCard(t)
	cfg, backend := simConfig(t, card, w, 3)
	heldConfig(&cfg, backend, card)
	return New(cfg), card, w
}

// heldCard is heldProber's card and workload.
func heldCard(t *testing.T) (sim.Card, sim.Workload) {
	card := sim.H100()
	card.Dir = t.TempDir()
	card.HoldPeak = true // every trial's peak is sampled, however busy the machine
	return card, sim.ResNet50()
}

// heldConfig makes cfg heldProber's: the limit, and the simulator's holder.
func heldConfig(cfg *Config, backend *sim.Backend, card sim.Card) {
	devices, _ := backend.Devices()
	cfg.Framework, cfg.MemoryLimit, cfg.DeviceTotal, cfg.WholeProcess = adapter.Torch{}, 24<<30, card.Total, true
	cfg.Holder, cfg.Devices, cfg.Slots = backend, devices, [][]int{{0}, {0}}
}

// A held trial runs alone, uncapped, while batchfit holds all but the
// limit of its GPU, and its answer is the real card's: the largest size
// whose whole process fits in 24 GiB.
func TestHeldTrialsHaveTheCardsMemory(t *testing.T) {
	p, card, w := heldProber(t)
	if err := p.CanHold(); err != nil {
		t.Fatalf("CanHold: %v", err)
	}
	truth := w.TrueMaxWholeProcess(card, 24<<30, 1, 4096, 1)
	p.SetHeld(true)
	obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{truth, truth + 1}, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if !obs[0].Outcome.Fits() || !obs[1].Outcome.TooLarge() {
		t.Errorf("held: %d %s, %d %s; want %d ok and %d out of memory", truth, obs[0].Outcome, truth+1, obs[1].Outcome, truth, truth+1)
	}
	for _, tr := range p.Trials() {
		if !tr.Held || tr.AllocatorCap != 0 || tr.SharedGPU {
			t.Errorf("trial %d: held %v, cap %d, shared %v; want held, no cap, alone", tr.N, tr.Held, tr.AllocatorCap, tr.SharedGPU)
		}
	}
	left, _ := filepath.Glob(filepath.Join(card.Dir, "*.held"))
	if len(left) != 0 {
		t.Errorf("memory still held after the trials: %v", left)
	}
}

// The held trial's environment is the user's: no allocator cap.
func TestHeldTrialEnvironmentHasNoCap(t *testing.T) {
	p, _, _ := heldProber(t)
	p.SetHeld(true)
	spec := p.spec(1, 8, []int{0}, special{held: true}, 0, filepath.Join(t.TempDir(), "t"))
	for _, kv := range spec.Env {
		if strings.Contains(kv, "per_process_memory_fraction") {
			t.Errorf("held trial's environment caps the allocator: %s", kv)
		}
	}
	capped := p.spec(1, 8, []int{0}, special{}, p.allocatorCap(), filepath.Join(t.TempDir(), "t"))
	if v, _ := adapter.Lookup(capped.Env, "PYTORCH_CUDA_ALLOC_CONF"); !strings.Contains(v, "per_process_memory_fraction") {
		t.Errorf("a capped trial's environment has no cap: %q", v)
	}
}

// A GPU that has less free than the card cannot be held: the error says
// how much is free.
func TestCanHoldRefusesAGPUShortOfTheLimit(t *testing.T) {
	p, card, _ := heldProber(t)
	backend := sim.NewBackend(card)
	devices, _ := backend.Devices()
	stranger, err := backend.Hold(devices[0], 20<<30) // leaves 20 GiB: less than 24
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Release()
	var short *hold.ShortError
	if err := p.CanHold(); !errors.As(err, &short) || short.Free != 20<<30 {
		t.Errorf("CanHold = %v; want a ShortError with 20 GiB free", err)
	}
}

// Without a Holder, or without a limit, nothing can be held.
func TestCanHoldNeedsAHolderAndALimit(t *testing.T) {
	if err := New(Config{MemoryLimit: 24 << 30}).CanHold(); !errors.Is(err, hold.ErrUnavailable) {
		t.Errorf("no holder: %v", err)
	}
	p, _, _ := heldProber(t)
	p.cfg.MemoryLimit = 0
	if err := p.CanHold(); !errors.Is(err, hold.ErrUnavailable) {
		t.Errorf("no limit: %v", err)
	}
}

// XLA's pool is sized as the named card gives it: jaxlib's default 75 %
// of the card (or the user's fraction), as a share of this GPU, capped
// trials no higher than their cap, and a program without a pool
// (XLA_PYTHON_CLIENT_ALLOCATOR=platform) left as it is.
func TestPoolEnvIsTheNamedCards(t *testing.T) {
	const total, limit = 80 << 30, 24 << 30
	fraction := func(env []string) string {
		v, _ := adapter.Lookup(env, adapter.XLAFractionEnv)
		return v
	}
	for _, tc := range []struct {
		name     string
		env      []string
		allocCap uint64
		want     string
	}{
		{"default, held", nil, 0, "0.225"},
		{"default, capped above the pool", nil, 23 << 30, "0.225"},
		{"default, capped below the pool", nil, 16 << 30, "0.2"},
		{"the user's fraction", []string{adapter.XLAFractionEnv + "=0.5"}, 0, "0.15"},
		{"no pool", []string{adapter.XLAAllocatorEnv + "=platform"}, 0, ""},
	} {
		p := New(Config{Framework: adapter.JAX{}, MemoryLimit: limit, DeviceTotal: total, WholeProcess: true, Env: tc.env})
		if got := fraction(p.limitEnv(tc.env, tc.allocCap)); got != tc.want {
			t.Errorf("%s: fraction %q, want %q", tc.name, got, tc.want)
		}
	}
	// Without a limit the whole card is the card: nothing is set.
	p := New(Config{Framework: adapter.JAX{}, DeviceTotal: total})
	if got := fraction(p.limitEnv(nil, 0)); got != "" {
		t.Errorf("no limit: fraction %q, want none", got)
	}
}

// An earlier run's figure for what lies outside the allocator caps the
// first trial; the first measurement replaces it. A trial that failed
// under a guess larger than what it measured runs again.
func TestOutsideGuess(t *testing.T) {
	p, _, _ := heldProber(t)
	p.cfg.OutsideGuess = 3 << 30
	if got := p.allocatorCap(); got != 21<<30 {
		t.Errorf("first cap %d, want 21 GiB (24 less the guess)", got)
	}
	if !p.guessing() {
		t.Error("not guessing before a trial")
	}
	obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{8}})
	if err != nil || !obs[0].Outcome.Fits() {
		t.Fatalf("trial at 8: %v, %v", obs, err)
	}
	if p.guessing() || p.Outside() == 0 || p.allocatorCap() != 24<<30-p.Outside() {
		t.Errorf("after a trial: guessing %v, outside %d, cap %d", p.guessing(), p.Outside(), p.allocatorCap())
	}

	// A guess far above this program's: a size that fits under the true
	// cap fails under the guessed one, and runs again.
	p2, card, w := heldProber(t)
	p2.cfg.OutsideGuess = 8 << 30
	truth := w.TrueMaxWholeProcess(card, 24<<30, 1, 4096, 1)
	obs, err = p2.Probe(context.Background(), search.Request{Sizes: []int{truth}})
	if err != nil || !obs[0].Outcome.Fits() {
		t.Fatalf("trial at %d under a large guess: %v, %v", truth, obs, err)
	}
	if n := len(p2.Trials()); n != 2 {
		t.Errorf("%d trials, want 2: the guessed one and its re-run", n)
	}
}

// A hold the driver refuses is a *HoldError naming the GPU.
func TestHoldRefusedIsAHoldError(t *testing.T) {
	p, _, _ := heldProber(t)
	p.cfg.Holder = holderFunc(func(gpu.Device, uint64) (hold.Hold, error) {
		return nil, errors.New("cuMemAlloc of 1048576 bytes: error 2")
	})
	_, err := p.holdFor(nil)
	var held *HoldError
	if !errors.As(err, &held) || held.GPU != p.cfg.Devices[0].Index || !strings.Contains(err.Error(), "cuMemAlloc") {
		t.Errorf("holdFor: %v, want a *HoldError for gpu %d", err, p.cfg.Devices[0].Index)
	}
}

type holderFunc func(gpu.Device, uint64) (hold.Hold, error)

func (f holderFunc) Hold(d gpu.Device, leave uint64) (hold.Hold, error) { return f(d, leave) }
