package adapter

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The adapter ends a trial after BATCHFIT_STEPS training steps. These tests
// run the real hook in real Python processes: Debian's CPU torch, and the
// stand-in torch for its CUDA path.

func TestHookStopsTorchAfterSteps(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	for _, tc := range []struct {
		name, steps string
		args        []string
		stopped     bool
		want        int // steps run
	}{
		{"stopped after 3 of 1000", "3", nil, true, 3},
		{"stopped after the first", "1", nil, true, 1},
		{"0 runs to the program's end", "0", []string{"5"}, false, 5},
		{"garbage runs to the program's end", "three", []string{"4"}, false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runHooked(t, py, []string{"BATCHFIT_STEPS=" + tc.steps}, append([]string{testdata("forever.py")}, tc.args...)...)
			if r.code != 0 {
				t.Fatalf("exit code %d, want 0; stderr:\n%s", r.code, r.stderr)
			}
			ev := onlyEvent(t, r)
			if ev.Stopped != tc.stopped || ev.Steps != tc.want || len(ev.StepTimes) != tc.want-1 || ev.Exception != "" || ev.Torch == "" {
				t.Errorf("event = %+v, want stopped %v after %d steps, %d step times, torch, no exception",
					ev, tc.stopped, tc.want, tc.want-1)
			}
			// The program prints after each optimizer step: a stopped one
			// never prints its last line, and nothing after it runs; its
			// unflushed output is not lost.
			printed := tc.want
			if tc.stopped {
				printed--
			}
			var lines []string
			for i := 1; i <= printed; i++ {
				lines = append(lines, fmt.Sprintf("step %d", i))
			}
			if !tc.stopped {
				lines = append(lines, "finally ran", "after loop", "program atexit ran")
			}
			if want := strings.Join(append(lines, ""), "\n"); r.stdout != want {
				t.Errorf("stdout =\n%s\nwant\n%s", r.stdout, want)
			}
			if tc.stopped && r.stderr != "" {
				t.Errorf("stderr:\n%s", r.stderr)
			}
		})
	}
}

// The stand-in torch takes the stop down the torch 2 hook and CUDA path:
// the peak after every step is reported with the stop.
func TestHookStopsFakeTorchCUDA(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	fake, err := filepath.Abs(testdata("faketorch"))
	if err != nil {
		t.Fatal(err)
	}
	r := runHooked(t, py, []string{"PYTHONPATH=" + fake, "FAKE_CUDA=1", "BATCHFIT_STEPS=2"}, testdata("faketrain.py"))
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("exit code %d, stdout %q (want 0 and nothing: the program is stopped in its loop); stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	ev := onlyEvent(t, r)
	want := Event{Version: 1, Event: "exit", PID: ev.PID, Torch: "2.99.0+fake", Steps: 2, StepTimes: ev.StepTimes,
		CUDAInitialized: true, DeviceIndex: 1, Device: "Fake H200", DeviceTotal: 150109880320,
		MaxAllocated: 25542543872, MaxReserved: 25767706624, Framework: "torch",
		StepPeaks: []uint64{25542543872, 25542543872}, Stopped: true,
		Sources: ev.Sources, Packages: ev.Packages} // TestHookReportsLoadedSources checks them
	if !reflect.DeepEqual(ev, want) || len(ev.StepTimes) != 1 {
		t.Errorf("event =\n%+v, want\n%+v with 1 step time", ev, want)
	}
}

// Every rank of a DDP program stops at the same step, exits 0 and reports,
// and none is left waiting for a peer that has gone (gloo on the CPU, two
// ranks started as torchrun would: RANK and WORLD_SIZE set).
func TestHookStopsEveryDDPRank(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	dir := t.TempDir()
	pythonPath, err := Install(filepath.Join(dir, "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ranks = 2
	outs := make([]string, ranks)
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for rank := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, py, testdata("ddp.py"))
			cmd.Env = Env(append(baseEnv(), "BATCHFIT_STEPS=3", fmt.Sprintf("RANK=%d", rank), fmt.Sprintf("WORLD_SIZE=%d", ranks),
				"INIT_METHOD=file://"+filepath.Join(dir, "rendezvous")), pythonPath, report)
			out, err := cmd.CombinedOutput()
			outs[rank], errs[rank] = string(out), err
		}()
	}
	wg.Wait()
	for rank := range ranks {
		if errs[rank] != nil {
			t.Errorf("rank %d: %v (a timeout means a rank waited for one that had stopped); output:\n%s", rank, errs[rank], outs[rank])
		}
		want := fmt.Sprintf("rank %d step 1\nrank %d step 2\n", rank, rank)
		if outs[rank] != want {
			t.Errorf("rank %d printed\n%s\nwant\n%s", rank, outs[rank], want)
		}
	}
	events, bad, err := Read(report)
	if err != nil || bad != 0 || len(events) != ranks {
		t.Fatalf("report: %d events, %d bad lines, %v; want %d events", len(events), bad, err, ranks)
	}
	var seen []int
	for _, ev := range events {
		seen = append(seen, ev.Rank)
		if !ev.Stopped || ev.Steps != 3 || ev.Exception != "" {
			t.Errorf("rank %d: event %+v, want stopped after 3 steps", ev.Rank, ev)
		}
	}
	if slices.Sort(seen); !slices.Equal(seen, []int{0, 1}) {
		t.Errorf("ranks reported: %v, want 0 and 1", seen)
	}
}
