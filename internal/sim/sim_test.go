package sim

import (
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPeakMonotone(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := range 300 {
		w := RandomWorkload(rng)
		if err := w.Validate(); err != nil {
			t.Fatalf("workload %d invalid: %v", i, err)
		}
		start := 1 + rng.Intn(5000)
		pa, pr, pd := w.Peak(start)
		for b := start + 1; b < start+200; b++ {
			a, r, d := w.Peak(b)
			if a <= pa {
				t.Fatalf("%+v: allocated(%d)=%d not above allocated(%d)=%d", w, b, a, b-1, pa)
			}
			if r < pr || d < pd {
				t.Fatalf("%+v: reserved or device memory fell from %d to %d", w, b-1, b)
			}
			if r < a || d != w.Context+r {
				t.Fatalf("%+v at %d: allocated %d reserved %d device %d", w, b, a, r, d)
			}
			pa, pr, pd = a, r, d
		}
	}
}

func TestPeakLaw(t *testing.T) {
	w := Workload{Context: 500 * MiB, Fixed: GiB, PerSample: 3 * MiB, Round: 2 * MiB}
	a, r, d := w.Peak(5)
	if a != GiB+15*MiB || r != GiB+16*MiB || d != 500*MiB+GiB+16*MiB {
		t.Errorf("Peak(5) = %d, %d, %d", a, r, d)
	}
	if !w.Fits(5, GiB+16*MiB) || w.Fits(5, GiB+16*MiB-1) {
		t.Error("Fits must compare reserved memory with the cap, inclusive")
	}
}

// TestTrueMaxBoundary checks the ground truth against the rule the child
// applies: the answer fits and the next candidate does not.
func TestTrueMaxBoundary(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	card := H100()
	const maxSize = 1 << 20
	for i := range 500 {
		w := RandomWorkload(rng)
		fraction := 1.0
		if rng.Intn(2) == 0 {
			fraction = 0.05 + 0.9*rng.Float64()
		}
		capBytes := w.Cap(card, fraction)
		for _, m := range []int{1, 8, 3} {
			got := w.TrueMax(card, fraction, 1, maxSize, m)
			if got == 0 {
				if w.Fits(m, capBytes) {
					t.Fatalf("case %d m=%d: TrueMax 0 but %d fits", i, m, m)
				}
				continue
			}
			if got%m != 0 || !w.Fits(got, capBytes) {
				t.Fatalf("case %d m=%d: TrueMax %d does not fit or is not a multiple", i, m, got)
			}
			if next := got + m; next <= maxSize && w.Fits(next, capBytes) {
				t.Fatalf("case %d m=%d: TrueMax %d but %d fits too", i, m, got, next)
			}
		}
	}
}

func TestTrueMaxBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	card := Card{Name: "small", Total: 24 * GiB}
	for i := range 200 {
		w := RandomWorkload(rng)
		lo, hi, m := 1+rng.Intn(20), 1+rng.Intn(3000), 1+rng.Intn(16)
		capBytes := w.Cap(card, 1)
		want := 0
		for b := lo; b <= hi; b++ {
			if b%m == 0 && w.Fits(b, capBytes) {
				want = b
			}
		}
		if got := w.TrueMax(card, 1, lo, hi, m); got != want {
			t.Fatalf("case %d [%d,%d] m=%d: TrueMax %d, brute force %d", i, lo, hi, m, got, want)
		}
	}
}

func TestTrueMaxFaultsAndRange(t *testing.T) {
	base := Workload{Context: 512 * MiB, Fixed: GiB, PerSample: 100 * MiB}
	card := Card{Name: "small", Total: 11 * GiB} // cap 10.5 GiB: 9.5 GiB for samples = 97
	tests := []struct {
		name          string
		change        func(*Workload)
		min, max, mul int
		want          int
	}{
		{"memory only", func(*Workload) {}, 1, 1000, 1, 97},
		{"multiple of 8", func(*Workload) {}, 1, 1000, 8, 96},
		{"max below boundary", func(*Workload) {}, 1, 50, 1, 50},
		{"min above boundary", func(*Workload) {}, 98, 1000, 1, 0},
		{"empty range", func(*Workload) {}, 10, 5, 1, 0},
		{"host oom", func(w *Workload) { w.HostOOMAt = 60 }, 1, 1000, 1, 59},
		{"size limit", func(w *Workload) { w.SizeLimitAt = 33 }, 1, 1000, 8, 32},
		{"hang", func(w *Workload) { w.HangAt = 90 }, 1, 1000, 1, 89},
		{"crash", func(w *Workload) { w.CrashAt = 10 }, 1, 1000, 1, 9},
		{"kill", func(w *Workload) { w.KillAt = 1 }, 1, 1000, 1, 0},
		{"fault above memory limit", func(w *Workload) { w.CrashAt = 500 }, 1, 1000, 1, 97},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := base
			tt.change(&w)
			if got := w.TrueMax(card, 1, tt.min, tt.max, tt.mul); got != tt.want {
				t.Errorf("TrueMax = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestCap(t *testing.T) {
	w := Workload{Context: 512 * MiB}
	card := H100()
	if got := w.Cap(card, 1); got != 80*GiB-512*MiB {
		t.Errorf("whole card cap %d", got)
	}
	if got := w.Cap(card, 0); got != 80*GiB-512*MiB {
		t.Errorf("no fraction cap %d", got)
	}
	if got := w.Cap(card, 0.3); got != uint64(0.3*float64(80*GiB)) {
		t.Errorf("fraction cap %d", got)
	}
	// A fraction above what is physically left leaves the physical limit.
	if got := w.Cap(card, 0.9999); got != 80*GiB-512*MiB {
		t.Errorf("physical cap under a large fraction %d", got)
	}
	if got := (Workload{Context: 90 * GiB}).Cap(card, 1); got != 0 {
		t.Errorf("context larger than the card: cap %d", got)
	}
}

// TestResNet50 pins the demo workload to the measured anchors.
func TestResNet50(t *testing.T) {
	w := ResNet50()
	card := H100()
	if got := w.TrueMax(card, float64(24*GiB)/float64(card.Total), 1, 4096, 1); got != 282 {
		t.Errorf("24 GiB limit: max %d, want 282", got)
	}
	whole := w.TrueMax(card, 1, 1, 4096, 1)
	if whole < 940 || whole > 960 {
		t.Errorf("whole 80 GiB card: max %d, want near 950", whole)
	}
	if w.PerSample < 80*MiB || w.PerSample > 85*MiB || w.Fixed < GiB/2 || w.Fixed > GiB || w.Context != 512*MiB {
		t.Errorf("numbers out of the documented range: %+v", w)
	}
	fastest, best := 0, 0.0
	for b := 1; b <= whole; b++ {
		if r := float64(b) / w.StepSeconds(b); r > best {
			fastest, best = b, r
		}
	}
	if fastest <= w.SaturateAt || fastest >= 282 {
		t.Errorf("fastest size %d: want one between saturation (%d) and the 24 GiB max", fastest, w.SaturateAt)
	}
}

func TestStepSeconds(t *testing.T) {
	w := Workload{StepOverhead: 10 * time.Millisecond, PerSampleTime: time.Millisecond, SaturateAt: 32}
	if got, want := w.StepSeconds(8), 0.010+0.032; !near(got, want) {
		t.Errorf("below saturation: %v, want %v", got, want)
	}
	if got, want := w.StepSeconds(32), 0.010+0.032; !near(got, want) {
		t.Errorf("at saturation: %v, want %v", got, want)
	}
	if got, want := w.StepSeconds(64), 0.010+0.064*(1+32.0/(16*32)); !near(got, want) {
		t.Errorf("past saturation: %v, want %v", got, want)
	}
	w.SaturateAt = 0
	if got, want := w.StepSeconds(64), 0.010+0.064; !near(got, want) {
		t.Errorf("affine: %v, want %v", got, want)
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

// A flaky trial loses FlakyBand samples of memory, and up to half a sample
// more, with probability FlakyP.
func TestFragmentation(t *testing.T) {
	w := Workload{PerSample: 100 * MiB, FlakyP: 0.2, FlakyBand: 3}
	for _, tt := range []struct {
		r    float64
		want uint64
	}{{0, 300 * MiB}, {0.1, 325 * MiB}, {0.2, 0}, {0.9, 0}} {
		if got := w.fragmentation(tt.r); got != tt.want {
			t.Errorf("fragmentation(%g) = %d, want %d", tt.r, got, tt.want)
		}
	}
	if got := (Workload{PerSample: MiB}).fragmentation(0); got != 0 {
		t.Errorf("not flaky: fragmentation(0) = %d", got)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		w    Workload
		bad  string
	}{
		{"ok", Workload{PerSample: MiB, Noise: MiB - 1}, ""},
		{"noise too big", Workload{PerSample: MiB, Noise: MiB}, "noise"},
		{"negative threshold", Workload{CrashAt: -1}, "crash-at"},
		{"negative duration", Workload{StepSleep: -time.Second}, "durations"},
		{"flaky", Workload{FlakyP: 0.2, FlakyBand: 3}, ""},
		{"flaky-p not a probability", Workload{FlakyP: 1.5, FlakyBand: 3}, "flaky-p"},
		{"flaky-p NaN", Workload{FlakyP: math.NaN(), FlakyBand: 3}, "flaky-p"},
		{"flaky without a band", Workload{FlakyP: 0.2}, "flaky-band"},
		{"negative flaky band", Workload{FlakyBand: -1}, "flaky-band"},
	}
	for _, tt := range tests {
		err := tt.w.Validate()
		if (err != nil) != (tt.bad != "") || (err != nil && !strings.Contains(err.Error(), tt.bad)) {
			t.Errorf("%s: Validate() = %v, want error about %q", tt.name, err, tt.bad)
		}
	}
}

// TestArgsRoundTrip checks that the child decodes exactly what Command
// encodes.
func TestArgsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	faulty := ResNet50()
	faulty.LeakPerTrial, faulty.CrashAt, faulty.HangAt, faulty.HostOOMAt = GiB, 1, 2, 3
	faulty.KillAt, faulty.SizeLimitAt, faulty.SlowStart = 4, 5, time.Second
	faulty.FlakyP, faulty.FlakyBand = 0.2, 3
	faulty.Name = "with spaces and -dashes"
	workloads := []Workload{ResNet50(), faulty, {}}
	for range 50 {
		workloads = append(workloads, RandomWorkload(rng))
	}
	card := Card{Name: "NVIDIA H100 80GB HBM3 (simulated)", Total: 80 * GiB, Count: 2, Dir: "/tmp/x y", HoldPeak: true}
	for _, w := range workloads {
		argv := Command("/bin/batchfit", card, w)
		if argv[0] != "/bin/batchfit" || argv[1] != ChildCommand || argv[len(argv)-2] != "--batch-size" || argv[len(argv)-1] != "{}" {
			t.Fatalf("argv shape: %q", argv)
		}
		args := append([]string(nil), argv[2:]...)
		args[len(args)-1] = "17"
		cfg, err := parseTrial(args, func(string) string { return "" })
		if err != nil {
			t.Fatalf("parse %q: %v", args, err)
		}
		if cfg.card != card || !reflect.DeepEqual(cfg.w, w) || cfg.batch != 17 || cfg.steps != 3 || cfg.trial != 1 {
			t.Fatalf("round trip of %+v gave %+v / %+v", w, cfg.w, cfg)
		}
	}
}

func TestParseTrialEnv(t *testing.T) {
	card := Card{Total: 8 * GiB}
	env := map[string]string{"BATCHFIT_BATCH_SIZE": "12", "BATCHFIT_STEPS": "5", "BATCHFIT_TRIAL": "4", "BATCHFIT_REPORT": "/r", "LOCAL_RANK": "2"}
	cfg, err := parseTrial(card.args(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.batch != 12 || cfg.steps != 5 || cfg.trial != 4 || cfg.reportPath != "/r" || cfg.rank != 2 || cfg.card.Name == "" {
		t.Errorf("config from env: %+v", cfg)
	}
	// The flag wins over the environment.
	cfg, err = parseTrial(append(card.args(), "--batch-size", "7"), func(k string) string { return env[k] })
	if err != nil || cfg.batch != 7 {
		t.Errorf("flag and env: %d, %v", cfg.batch, err)
	}
	// --steps 0: the simulated program runs its own 3 steps.
	env["BATCHFIT_STEPS"] = "0"
	if cfg, err = parseTrial(card.args(), func(k string) string { return env[k] }); err != nil || cfg.steps != 3 {
		t.Errorf("BATCHFIT_STEPS=0: steps %d, %v; want 3", cfg.steps, err)
	}
}

func TestAllocFraction(t *testing.T) {
	tests := []struct {
		cuda, generic string
		want          float64
		bad           bool
	}{
		{"", "", 0, false},
		{"expandable_segments:True", "", 0, false},
		{"per_process_memory_fraction:0.3", "", 0.3, false},
		{"expandable_segments:True, per_process_memory_fraction: 0.25", "", 0.25, false},
		{"per_process_memory_fraction:0.3", "per_process_memory_fraction:0.5", 0.5, false},
		{"per_process_memory_fraction:1", "", 1, false},
		{"per_process_memory_fraction:0", "", 0, true},
		{"per_process_memory_fraction:1.5", "", 0, true},
		{"per_process_memory_fraction:half", "", 0, true},
	}
	for _, tt := range tests {
		env := map[string]string{"PYTORCH_CUDA_ALLOC_CONF": tt.cuda, "PYTORCH_ALLOC_CONF": tt.generic}
		got, err := allocFraction(func(k string) string { return env[k] })
		if got != tt.want || (err != nil) != tt.bad {
			t.Errorf("%q / %q: %v, %v", tt.cuda, tt.generic, got, err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	tests := map[uint64]string{
		1024:          "1024 bytes",
		1536:          "1.50 KiB",
		MiB:           "1024.00 KiB",
		20 * MiB:      "20.00 MiB",
		GiB:           "1024.00 MiB",
		24 * GiB:      "24.00 GiB",
		80*GiB - 1<<9: "80.00 GiB",
	}
	for n, want := range tests {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestHoldMain(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	done := make(chan int)
	go func() {
		done <- HoldMain([]string{"--state-dir", dir, "--bytes", "3GiB", "--ready", ready}, io.Discard)
	}()
	for i := 0; ; i++ {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if i > 5000 {
			t.Fatal("never ready")
		}
		time.Sleep(time.Millisecond)
	}
	b := NewBackend(Card{Name: "sim", Total: 80 * GiB, Dir: dir})
	procs, err := b.ProcessMemory(0)
	if err != nil || procs[os.Getpid()] != 3*GiB {
		t.Fatalf("listed %v, %v; want this process holding 3 GiB", procs, err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if code := <-done; code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if procs, _ := b.ProcessMemory(0); len(procs) != 0 {
		t.Errorf("still listed after exit: %v", procs)
	}
	if code := HoldMain([]string{"--state-dir", dir}, io.Discard); code != 2 {
		t.Errorf("without --bytes: exit %d, want 2", code)
	}
}
