package probe

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/sim"
)

// busyProber runs simulated trials on a card whose state directory a test
// can put a stranger on.
func busyProber(t *testing.T) (*Prober, sim.Card) {
	t.Helper()
	card := sim.H100()
	card.Dir = t.TempDir()
	card.HoldPeak = true
	w := sim.ResNet50()
	w.StepSleep = 30 * time.Millisecond
	cfg, _ := simConfig(t, card, w, 3)
	cfg.ForeignLimit = 256 * sim.MiB
	return New(cfg), card
}

// stranger puts a stranger holding 2 GiB on the card: this test process, which
// is outside every trial's tree and descends from no batchfit, as another
// user's job.
func stranger(t *testing.T, card sim.Card, args ...string) <-chan int {
	t.Helper()
	done := make(chan int, 1)
	args = append([]string{"--state-dir", card.Dir, "--bytes", "2GiB"}, args...)
	go func() { done <- sim.HoldMain(args, io.Discard) }()
	return done
}

// A job that starts and ends during one trial: the trial is recorded as
// disturbed and runs again, and the search sees the clean re-run only.
func TestForeignProcessMidTrialReruns(t *testing.T) {
	p, card := busyProber(t)
	done := stranger(t, card, "--during-trial")
	obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{8}})
	if err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 {
		t.Fatalf("holder exit %d", code)
	}
	trials := p.Trials()
	if len(obs) != 1 || obs[0].Outcome != classify.OK || len(trials) != 2 {
		t.Fatalf("observations %+v, %d trials; want one ok observation from two trials", obs, len(trials))
	}
	if !trials[0].Busy || trials[0].Foreign != 2*sim.GiB || len(trials[0].ForeignPIDs) != 1 || trials[0].ForeignPIDs[0] != os.Getpid() {
		t.Errorf("first trial busy %v, foreign %d by %v; want busy, 2 GiB by this process", trials[0].Busy, trials[0].Foreign, trials[0].ForeignPIDs)
	}
	if trials[1].Busy || trials[1].Foreign != 0 {
		t.Errorf("re-run busy %v, foreign %d; want clean", trials[1].Busy, trials[1].Foreign)
	}
}

// A job that stays: after MaxBusyReruns re-runs the search stops, naming it.
func TestForeignProcessThatStaysStopsTheSearch(t *testing.T) {
	p, card := busyProber(t)
	ready := filepath.Join(t.TempDir(), "ready")
	done := stranger(t, card, "--ready", ready)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("holder never ready")
		}
	}
	_, err := p.Probe(context.Background(), search.Request{Sizes: []int{8}})
	var busy *GPUBusyError
	if !errors.As(err, &busy) || busy.Trials != MaxBusyReruns+1 || busy.Foreign != 2*sim.GiB {
		t.Fatalf("error %v; want a GPUBusyError after %d trials", err, MaxBusyReruns+1)
	}
	if n := len(p.Trials()); n != MaxBusyReruns+1 {
		t.Errorf("%d trials recorded, want %d", n, MaxBusyReruns+1)
	}
	p.cfg.Sampler.SetBaseline(map[int]map[int]uint64{0: {os.Getpid(): 2 * sim.GiB}})
	obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{8}})
	if err != nil || obs[0].Outcome != classify.OK {
		t.Errorf("with the stranger in the baseline: %+v, %v; want ok", obs, err)
	}
	stopHolder(t, done)
}

// stopHolder ends a holder as Ctrl-C would; it exits 0.
func stopHolder(t *testing.T, done <-chan int) {
	t.Helper()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if code := <-done; code != 0 {
		t.Errorf("holder exit %d, want 0", code)
	}
}
