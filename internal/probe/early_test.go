package probe

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/hold"
	"github.com/batchfit/batchfit/internal/search"
)

// earlyProber is heldProber's, with warnings kept and a slow start (the
// interpreter and imports) for the early trials to overlap; one capped
// trial has run, as the search's do before the proof, so that the prober
// knows the program's framework and that NVML names its processes.
func earlyProber(t *testing.T, pastGate bool) (p *Prober, truth int, warnings func() []string) {
	t.Helper()
	card, w := heldCard(t)
	w.SlowStart, w.PastGate = 300*time.Millisecond, pastGate
	cfg, backend := simConfig(t, card, w, 3)
	heldConfig(&cfg, backend, card)
	var mu sync.Mutex
	var said []string
	cfg.Warn = func(msg string) {
		mu.Lock()
		said = append(said, msg)
		mu.Unlock()
	}
	p = New(cfg)
	t.Cleanup(func() { p.Close() })
	if _, err := p.Probe(context.Background(), search.Request{Sizes: []int{8}}); err != nil {
		t.Fatal(err)
	}
	p.SetHeld(true)
	truth = w.TrueMaxWholeProcess(card, 24<<30, 1, 4096, 1)
	return p, truth, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), said...)
	}
}

// probeProof runs a held round of the proof's sizes, truth, truth + 1 and
// truth again, and checks their outcomes.
func probeProof(t *testing.T, p *Prober, truth int) {
	t.Helper()
	obs, err := p.Probe(context.Background(), search.Request{Sizes: []int{truth, truth + 1, truth}, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if !obs[0].Outcome.Fits() || !obs[1].Outcome.TooLarge() || !obs[2].Outcome.Fits() {
		t.Errorf("outcomes %s %s %s, want ok, oom, ok", obs[0].Outcome, obs[1].Outcome, obs[2].Outcome)
	}
}

// A held round's trials run one after the other, each alone on the card;
// each after the first starts while the one before it runs, and waits at
// its gate: numbered in order, with the answers of trials run one at a
// time.
func TestHeldRoundStartsTheNextTrialEarly(t *testing.T) {
	p, truth, warnings := earlyProber(t, false)
	probeProof(t, p, truth)
	trials := p.Trials()
	if len(trials) != 4 {
		t.Fatalf("%d trials, want the capped one and 3 held", len(trials))
	}
	for i, tr := range trials[1:] {
		if tr.N != i+2 || tr.Size != []int{truth, truth + 1, truth}[i] || !tr.Held {
			t.Errorf("held trial %d: number %d, size %d, held %v", i+1, tr.N, tr.Size, tr.Held)
		}
		if early := i > 0; tr.StartedEarly != early {
			t.Errorf("trial %d: started early %v, want %v", tr.N, tr.StartedEarly, early)
		}
		if tr.Seconds <= 0 {
			t.Errorf("trial %d: %v s", tr.N, tr.Seconds)
		}
		// Each ran while the next one started (the last, the spare): no
		// throughput of its own.
		if !tr.BesideEarly || tr.Throughput() != 0 {
			t.Errorf("trial %d: beside an early trial %v, throughput %v; want true, none", tr.N, tr.BesideEarly, tr.Throughput())
		}
	}
	if w := warnings(); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
}

// A program that reaches the GPU around the gate takes memory beside the
// trial before it: that trial runs again, the early one is stopped and
// numbered again in order, and no trial starts early from then on.
func TestEarlyTrialThatTookMemoryRunsAgain(t *testing.T) {
	p, truth, warnings := earlyProber(t, true)
	probeProof(t, p, truth)
	trials := p.Trials()
	var numbers []int
	for i, tr := range trials {
		numbers = append(numbers, tr.N)
		if tr.N != i+1 {
			t.Errorf("trial %d recorded as number %d: numbers %v", i+1, tr.N, numbers)
		}
		if tr.StartedEarly {
			t.Errorf("trial %d started early, from a program that passes the gate", tr.N)
		}
	}
	// The capped trial, the disturbed one, its re-run, then the pair.
	if len(trials) != 5 || !trials[1].Busy || trials[2].Busy || trials[2].Size != truth {
		t.Errorf("trials %+v: want the first held trial disturbed (busy) and run again", trials)
	}
	w := warnings()
	if len(w) != 1 || !strings.Contains(w[0], "started early") || !strings.Contains(w[0], "starting no trial early from now on") {
		t.Errorf("warnings %q, want one on the early trial that took memory", w)
	}
	// The stopped trial's files are gone; its number went to the re-run.
	logs, _ := filepath.Glob(filepath.Join(p.cfg.LogDir, "trial-*.out"))
	var want []string
	for _, tr := range trials {
		want = append(want, filepath.Join(p.cfg.LogDir, fmt.Sprintf("trial-%03d-b%d.out", tr.N, tr.Size)))
	}
	if !slices.Equal(logs, want) {
		t.Errorf("logs %q, want %q", logs, want)
	}
}

// The last trial of a held round starts the round's first size early for
// the next round (a proof's re-check repeats its pair): a next round that
// opens with it takes it; one that opens otherwise stops it, and the
// numbers stay in order.
func TestHeldRoundsShareASpareTrial(t *testing.T) {
	p, truth, warnings := earlyProber(t, false)
	pair := []int{truth, truth + 1}
	for _, sizes := range [][]int{pair, pair, {truth - 1}} {
		if _, err := p.Probe(context.Background(), search.Request{Sizes: sizes, Fresh: true}); err != nil {
			t.Fatal(err)
		}
	}
	p.DropSpare()
	trials := p.Trials()
	var got []string
	for _, tr := range trials {
		got = append(got, fmt.Sprintf("%d:%d:%v", tr.N, tr.Size, tr.StartedEarly))
	}
	want := []string{"1:8:false",
		fmt.Sprintf("2:%d:false", truth), fmt.Sprintf("3:%d:true", truth+1),
		fmt.Sprintf("4:%d:true", truth), fmt.Sprintf("5:%d:true", truth+1),
		fmt.Sprintf("6:%d:false", truth-1)}
	if !slices.Equal(got, want) {
		t.Errorf("trials (number:size:started early) %v, want %v", got, want)
	}
	logs, _ := filepath.Glob(filepath.Join(p.cfg.LogDir, "trial-*.out"))
	if len(logs) != len(trials) {
		t.Errorf("logs %q: the spares stopped unused left files", logs)
	}
	if w := warnings(); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
}

// failingHolder holds as the simulator does until its calls run out.
type failingHolder struct {
	hold.Holder
	left int
}

func (f *failingHolder) Hold(d gpu.Device, limit uint64) (hold.Hold, error) {
	if f.left--; f.left < 0 {
		return nil, errors.New("hold refused")
	}
	return f.Holder.Hold(d, limit)
}

// An early trial whose card cannot be held is stopped at its gate with the
// error: nothing of it is left running, nor its files.
func TestEarlyTrialStoppedWhenItsHoldFails(t *testing.T) {
	p, truth, _ := earlyProber(t, false)
	p.cfg.Holder = &failingHolder{Holder: p.cfg.Holder, left: 1}
	_, err := p.Probe(context.Background(), search.Request{Sizes: []int{truth, truth + 1}, Fresh: true})
	var held *HoldError
	if !errors.As(err, &held) {
		t.Fatalf("Probe = %v, want a HoldError", err)
	}
	left, _ := filepath.Glob(filepath.Join(p.cfg.LogDir, "trial-003-*"))
	if len(left) != 0 {
		t.Errorf("the early trial left %q", left)
	}
}
