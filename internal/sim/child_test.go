package sim

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
)

// TestMain lets the test binary act as the batchfit binary: re-executed with
// "__sim-trial" it is a simulated trial, so the tests spawn real children.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildCommand {
		os.Exit(Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// result is a finished child trial.
type result struct {
	code           int // -1 when killed by a signal
	signal         syscall.Signal
	stdout, stderr string
	events         []adapter.Event
}

// trialCmd prepares a child of the test binary running w on card at batch,
// with a clean environment plus env ("KEY=VALUE"), reporting to a fresh
// report file.
func trialCmd(t *testing.T, card Card, w Workload, batch int, env ...string) (*exec.Cmd, string, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := Command(exe, card, w)
	for i, a := range argv {
		if a == "{}" {
			argv[i] = strconv.Itoa(batch)
		}
	}
	report := filepath.Join(t.TempDir(), "report.jsonl")
	cmd := exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "RANK", "LOCAL_RANK":
			continue
		}
		if strings.HasPrefix(k, "BATCHFIT_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, adapter.ReportEnv+"="+report)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, report, &stdout, &stderr
}

func finish(t *testing.T, cmd *exec.Cmd, err error, report string, stdout, stderr *bytes.Buffer) result {
	t.Helper()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run child: %v", err)
	}
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.signal = ws.Signal()
	}
	events, bad, rerr := adapter.Read(report)
	if rerr != nil || bad != 0 {
		t.Fatalf("report: %v, %d bad lines", rerr, bad)
	}
	r.events = events
	return r
}

func runTrial(t *testing.T, card Card, w Workload, batch int, env ...string) result {
	t.Helper()
	cmd, report, stdout, stderr := trialCmd(t, card, w, batch, env...)
	err := cmd.Run()
	return finish(t, cmd, err, report, stdout, stderr)
}

// classify is batchfit's verdict on the trial, so the simulated texts are
// checked against the classifier the real tool uses.
func (r result) classify() classify.Outcome {
	in := classify.Input{ExitCode: r.code, Signal: r.signal, Output: []byte(r.stderr + r.stdout)}
	if len(r.events) > 0 {
		in.Event = &r.events[0]
	}
	return classify.Classify(in).Outcome
}

// the only exit event of a trial
func (r result) event(t *testing.T) adapter.Event {
	t.Helper()
	if len(r.events) != 1 {
		t.Fatalf("want one report event, got %d (stderr %q)", len(r.events), r.stderr)
	}
	ev := r.events[0]
	if ev.Event != "exit" || ev.Version != 1 || ev.Torch != "2.11.0+sim" || ev.PID <= 0 {
		t.Errorf("event header: %+v", ev)
	}
	return ev
}

// testCard is a small card with its own state directory.
func testCard(t *testing.T) Card {
	return Card{Name: "Simulated 16 GiB", Total: 16 * GiB, Count: 2, Dir: t.TempDir()}
}

// testWorkload fits 150 samples on testCard: 16 GiB − 0.5 GiB context −
// 0.5 GiB fixed leaves 15 GiB = 153.6 × 100 MiB, rounded by 2 MiB.
func testWorkload() Workload {
	return Workload{
		Name: "tiny", Context: 512 * MiB, Fixed: 512 * MiB, PerSample: 100 * MiB, Round: 2 * MiB,
		Noise: 3 * MiB, Seed: 7, StepOverhead: 10 * time.Millisecond, PerSampleTime: time.Millisecond, SaturateAt: 16,
		StepSleep: time.Millisecond,
	}
}

func TestChildFitsBelowAndOOMAbove(t *testing.T) {
	card, w := testCard(t), testWorkload()
	max := w.TrueMax(card, 1, 1, 1000, 1)
	if max < 140 || max > 155 {
		t.Fatalf("test workload max %d, expected about 150", max)
	}

	ok := runTrial(t, card, w, max)
	if ok.code != 0 {
		t.Fatalf("at max %d: exit %d, stderr %q", max, ok.code, ok.stderr)
	}
	if !strings.Contains(ok.stdout, "step 3/3 loss") || ok.stderr != "" {
		t.Errorf("at max: stdout %q stderr %q", ok.stdout, ok.stderr)
	}
	ev := ok.event(t)
	alloc, res, _ := w.Peak(max)
	if !ev.CUDAInitialized || ev.Device != card.Name || ev.DeviceTotal != card.Total || ev.MaxAllocated != alloc || ev.MaxReserved != res || ev.OOM || ev.Exception != "" {
		t.Errorf("ok event: %+v, want peak %d/%d", ev, alloc, res)
	}
	if len(ev.StepTimes) != 3 || ev.StepTimes[0] != w.StepSeconds(max) {
		t.Errorf("step times %v, want 3 × %v", ev.StepTimes, w.StepSeconds(max))
	}

	oom := runTrial(t, card, w, max+1)
	if oom.code != 1 {
		t.Fatalf("above max: exit %d, stderr %q", oom.code, oom.stderr)
	}
	for _, want := range []string{
		"Traceback (most recent call last):\n",
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ",
		"GPU 0 has a total capacity of 16.00 GiB of which ",
		"Including non-PyTorch memory, this process has ",
		"is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n",
	} {
		if !strings.Contains(oom.stderr, want) {
			t.Errorf("OOM stderr lacks %q:\n%s", want, oom.stderr)
		}
	}
	if strings.Contains(oom.stdout, "step 1/") || strings.Contains(oom.stderr, "allowed;") {
		t.Errorf("OOM trial trained or claims a fraction: %q / %q", oom.stdout, oom.stderr)
	}
	if got := oom.classify(); got != classify.OOM {
		t.Errorf("batchfit would call the OOM trial %s", got)
	}
	if got := ok.classify(); got != classify.OK {
		t.Errorf("batchfit would call the ok trial %s", got)
	}
	// Without the adapter's event the output alone must say OOM.
	oomNoEvent := oom
	oomNoEvent.events = nil
	if got := oomNoEvent.classify(); got != classify.OOM {
		t.Errorf("from output alone batchfit would call the OOM trial %s", got)
	}
	if tried, capacity, free, ok := classify.ParseTorchOOM([]byte(oom.stderr)); !ok || tried == 0 || capacity != card.Total || free == 0 {
		t.Errorf("ParseTorchOOM: %d %d %d %v", tried, capacity, free, ok)
	}
	ev = oom.event(t)
	if !ev.OOM || !strings.HasPrefix(ev.Exception, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate") || len(ev.StepTimes) != 0 {
		t.Errorf("OOM event: %+v", ev)
	}
	if ev.MaxReserved > w.Cap(card, 1) || ev.MaxAllocated == 0 || ev.MaxAllocated > ev.MaxReserved {
		t.Errorf("OOM event peaks %d/%d against cap %d", ev.MaxAllocated, ev.MaxReserved, w.Cap(card, 1))
	}
	if entries, _ := os.ReadDir(card.Dir); hasMem(entries) {
		t.Errorf("children left their memory registered: %v", entries)
	}
}

func hasMem(entries []os.DirEntry) bool {
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), memSuffix) {
			return true
		}
	}
	return false
}

// TestChildRandomShapes runs real children at the ground-truth boundary of
// a few random workloads, with and without a memory fraction.
func TestChildRandomShapes(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	card := H100()
	card.Dir = t.TempDir()
	for i := range 4 {
		w := RandomWorkload(rng)
		w.StepSleep = 0
		fraction, env := 1.0, []string(nil)
		if i%2 == 1 {
			fraction = 0.4
			env = []string{"PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:0.4"}
		}
		max := w.TrueMax(card, fraction, 1, 1<<20, 8)
		if max == 0 {
			t.Fatalf("case %d: nothing fits (%+v)", i, w)
		}
		if r := runTrial(t, card, w, max, env...); r.code != 0 {
			t.Errorf("case %d at TrueMax %d: exit %d, %s", i, max, r.code, r.stderr)
		}
		if r := runTrial(t, card, w, max+8, env...); r.code != 1 || !r.event(t).OOM {
			t.Errorf("case %d at TrueMax+8 %d: exit %d, %s", i, max+8, r.code, r.stderr)
		}
	}
}

func TestChildFractionCap(t *testing.T) {
	card := H100()
	card.Dir = t.TempDir()
	w := ResNet50()
	w.StepSleep = 0
	f := float64(24*GiB) / float64(card.Total)
	conf := "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,per_process_memory_fraction:" + strconv.FormatFloat(f, 'g', -1, 64)
	if r := runTrial(t, card, w, 282, conf); r.code != 0 {
		t.Fatalf("282 under 24 GiB: exit %d, %s", r.code, r.stderr)
	}
	r := runTrial(t, card, w, 283, conf)
	if r.code != 1 || !strings.Contains(r.stderr, "24.00 GiB allowed; Of the allocated memory ") {
		t.Fatalf("283 under 24 GiB: exit %d, %s", r.code, r.stderr)
	}
	if ev := r.event(t); !ev.OOM || ev.MaxReserved > 24*GiB {
		t.Errorf("event %+v", ev)
	}
	// The newer variable name wins, as in torch.
	r = runTrial(t, card, w, 283, "PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:0.3", "PYTORCH_ALLOC_CONF=per_process_memory_fraction:0.5")
	if r.code != 0 {
		t.Errorf("PYTORCH_ALLOC_CONF ignored: exit %d, %s", r.code, r.stderr)
	}
	r = runTrial(t, card, w, 10, "PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:2")
	if r.code != 1 || !strings.Contains(r.stderr, "RuntimeError: per_process_memory_fraction is invalid") {
		t.Errorf("bad fraction: exit %d, %s", r.code, r.stderr)
	}
}

func TestChildEnvironment(t *testing.T) {
	card, w := testCard(t), testWorkload()
	exe, _ := os.Executable()
	argv := Command(exe, card, w)
	argv = argv[:len(argv)-2] // no --batch-size: BATCHFIT_BATCH_SIZE instead

	report := filepath.Join(t.TempDir(), "r.jsonl")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "BATCHFIT_BATCH_SIZE=20", "BATCHFIT_STEPS=5", adapter.ReportEnv+"="+report, "CUDA_VISIBLE_DEVICES=1,0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r := finish(t, cmd, cmd.Run(), report, &stdout, &stderr)
	if r.code != 0 || !strings.Contains(r.stdout, "batch size 20") || !strings.Contains(r.stdout, "step 5/5") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if ev := r.event(t); len(ev.StepTimes) != 5 || ev.StepTimes[4] != w.StepSeconds(20) {
		t.Errorf("step times %v", ev.StepTimes)
	}

	r = runTrial(t, card, w, 20, "CUDA_VISIBLE_DEVICES=")
	if r.code != 1 || !strings.Contains(r.stderr, "RuntimeError: No CUDA GPUs are available") || r.event(t).CUDAInitialized {
		t.Errorf("no visible device: exit %d, %s", r.code, r.stderr)
	}
	r = runTrial(t, card, w, 20, "CUDA_VISIBLE_DEVICES="+simUUID(1))
	if r.code != 0 {
		t.Errorf("device by UUID: exit %d, %s", r.code, r.stderr)
	}
}

func TestChildBadArgs(t *testing.T) {
	card, w := testCard(t), testWorkload()
	exe, _ := os.Executable()
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{"unsubstituted size", Command(exe, card, w), `--batch-size: want a positive integer, got "{}"`},
		{"zero size", append(Command(exe, card, w)[:len(Command(exe, card, w))-1], "0"), "want a positive integer"},
		{"unknown flag", append(Command(exe, card, w), "--bogus"), "flag provided but not defined"},
		{"no card", []string{exe, ChildCommand, "--batch-size", "3"}, "--card-total is required"},
		{"noise too big", append([]string{exe, ChildCommand, "--card-total", "100", "--per-sample", "4", "--noise", "4"}, "--batch-size", "3"), "noise"},
		{"no size at all", []string{exe, ChildCommand, "--card-total", "100"}, "no batch size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(tt.argv[0], tt.argv[1:]...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Env = []string{}
			err := cmd.Run()
			if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %v (%v), stderr %q, want %q", cmd.ProcessState, err, stderr.String(), tt.want)
			}
		})
	}
}

func TestChildFaults(t *testing.T) {
	card := testCard(t)
	tests := []struct {
		name      string
		change    func(*Workload)
		code      int
		stderr    []string
		exception string // prefix; "" = no report event expected
		signal    syscall.Signal
		outcome   classify.Outcome // batchfit's verdict on the trial
	}{
		{
			name: "crash", change: func(w *Workload) { w.CrashAt = 50 }, code: 1,
			stderr:    []string{"Traceback (most recent call last):", "linear.py", "RuntimeError: mat1 and mat2 shapes cannot be multiplied (120x2048 and 1024x128)\n"},
			exception: "RuntimeError: mat1 and mat2 shapes cannot be multiplied", outcome: classify.Crash,
		},
		{
			name: "host oom", change: func(w *Workload) { w.HostOOMAt = 50 }, code: 1,
			stderr:    []string{"Traceback (most recent call last):", "RuntimeError: [enforce fail at alloc_cpu.cpp:83] . DefaultCPUAllocator: can't allocate memory: you tried to allocate ", " bytes. Error code 12 (Cannot allocate memory)\n"},
			exception: "RuntimeError: [enforce fail at alloc_cpu.cpp:83] . DefaultCPUAllocator: can't allocate memory", outcome: classify.HostOOM,
		},
		{
			name: "size limit", change: func(w *Workload) { w.SizeLimitAt = 50 }, code: 1,
			stderr:    []string{"Traceback (most recent call last):", "RuntimeError: CUDA error: invalid configuration argument\nCUDA kernel errors might be asynchronously reported"},
			exception: "RuntimeError: CUDA error: invalid configuration argument", outcome: classify.SizeLimit,
		},
		{
			name: "kill", change: func(w *Workload) { w.KillAt = 50 }, code: -1, signal: syscall.SIGKILL, outcome: classify.Crash,
		},
		{
			name: "slow start", change: func(w *Workload) { w.SlowStart = 20 * time.Millisecond; w.CrashAt = 61 }, code: 0, outcome: classify.OK,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := testWorkload()
			tt.change(&w)
			r := runTrial(t, card, w, 60)
			if r.code != tt.code || r.signal != tt.signal {
				t.Fatalf("exit %d signal %v, want %d %v; stderr %q", r.code, r.signal, tt.code, tt.signal, r.stderr)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
			switch {
			case tt.code == 0:
				if ev := r.event(t); ev.Exception != "" {
					t.Errorf("ok run reported %q", ev.Exception)
				}
			case tt.exception != "":
				if ev := r.event(t); ev.OOM || !strings.HasPrefix(ev.Exception, tt.exception) {
					t.Errorf("event %+v, want exception %q", ev, tt.exception)
				}
			default:
				if len(r.events) != 0 {
					t.Errorf("a killed process reported %+v", r.events)
				}
			}
			if got := r.classify(); got != tt.outcome {
				t.Errorf("batchfit would call it %s, want %s", got, tt.outcome)
			}
			outputOnly := r
			outputOnly.events = nil
			if got := outputOnly.classify(); got != tt.outcome {
				t.Errorf("from output alone batchfit would call it %s, want %s", got, tt.outcome)
			}
			// Below the threshold the same workload trains normally.
			if r := runTrial(t, card, w, 49); r.code != 0 {
				t.Errorf("below the threshold: exit %d, %s", r.code, r.stderr)
			}
		})
	}
	if used, err := NewBackend(card).UsedMemory(0); err != nil || used != 0 {
		t.Errorf("after the fault runs the card holds %d (%v)", used, err)
	}
}

// A flaky trainer runs out of memory at random within FlakyBand samples of
// its limit, with torch's own error, and never below the band. Without
// noise and rounding the band is exact.
func TestChildFlaky(t *testing.T) {
	card, w := testCard(t), testWorkload()
	w.Noise, w.Round, w.FlakyBand = 0, 0, 3
	limit := w.TrueMax(card, 1, 1, 1000, 1)
	w.FlakyP = 1
	for size := limit - 3; size <= limit; size++ {
		r := runTrial(t, card, w, size)
		want := classify.OOM
		if size == limit-3 {
			want = classify.OK
		}
		if got := r.classify(); got != want {
			t.Errorf("always flaky, %d below the limit: %s, want %s; stderr %q", limit-size, got, want, r.stderr)
		}
		if want == classify.OOM && !strings.Contains(r.stderr, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate") {
			t.Errorf("stderr %q, want torch's out-of-memory error", r.stderr)
		}
	}
	// Half the time: 24 trials at the limit are not all alike (a chance
	// of 2⁻²³ that they are).
	w.FlakyP = 0.5
	seen := map[classify.Outcome]int{}
	for range 24 {
		seen[runTrial(t, card, w, limit).classify()]++
	}
	if seen[classify.OK] == 0 || seen[classify.OOM] == 0 || len(seen) != 2 {
		t.Errorf("24 trials at the limit, half flaky: %v", seen)
	}
}

// waitUsage polls the backend until pid holds want bytes on dev.
func waitUsage(t *testing.T, b *Backend, dev, pid int, want uint64) {
	t.Helper()
	var got map[int]uint64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var err error
		if got, err = b.ProcessMemory(dev); err != nil {
			t.Fatal(err)
		}
		if got[pid] == want {
			return
		}
	}
	t.Fatalf("backend never saw pid %d holding %d on device %d: %v", pid, want, dev, got)
}

// TestBackendSeesRunningChild hangs a child at its peak, checks the backend
// and a competing child see its memory, then kills it and checks the memory
// comes back.
func TestBackendSeesRunningChild(t *testing.T) {
	card, w := testCard(t), testWorkload()
	w.HangAt = 1
	b := NewBackend(card)
	devs, err := b.Devices()
	if err != nil || len(devs) != 2 || devs[1].Index != 1 || devs[1].Total != card.Total || devs[1].Name != card.Name {
		t.Fatalf("devices %+v, %v", devs, err)
	}

	cmd, _, _, _ := trialCmd(t, card, w, 80, "CUDA_VISIBLE_DEVICES=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	_, _, device := w.Peak(80)
	waitUsage(t, b, 1, cmd.Process.Pid, device)
	if used, _ := b.UsedMemory(1); used != device {
		t.Errorf("device 1 used %d, want %d", used, device)
	}
	if used, _ := b.UsedMemory(0); used != 0 {
		t.Errorf("device 0 used %d, want 0", used)
	}

	// 80 fits alone, but not beside the hung child.
	other := testWorkload()
	r := runTrial(t, card, other, 80, "CUDA_VISIBLE_DEVICES=1")
	if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("Process %d has %s memory in use. ", cmd.Process.Pid, formatSize(device))) {
		t.Errorf("competing child: exit %d, %s", r.code, r.stderr)
	}
	if r := runTrial(t, card, other, 80, "CUDA_VISIBLE_DEVICES=0"); r.code != 0 {
		t.Errorf("same size on the idle device: exit %d, %s", r.code, r.stderr)
	}

	// The hung child is still there, holding its memory, until killed.
	if procs, _ := b.ProcessMemory(1); procs[cmd.Process.Pid] != device {
		t.Errorf("hung child no longer holds its memory: %v", procs)
	}
	if cmd.ProcessState != nil {
		t.Fatal("hung child exited by itself")
	}
	// SIGKILL leaves the child's file behind; the backend must not count a
	// dead process.
	cmd.Process.Kill()
	cmd.Wait()
	procs, err := b.ProcessMemory(1)
	if err != nil || len(procs) != 0 {
		t.Errorf("after kill: %v, %v", procs, err)
	}
	if used, _ := b.UsedMemory(1); used != 0 {
		t.Errorf("after kill device 1 used %d", used)
	}
	if _, err := b.ProcessMemory(2); err == nil {
		t.Error("no error for a device the card does not have")
	}
}

func TestLeakPerTrial(t *testing.T) {
	card, w := testCard(t), testWorkload()
	w.LeakPerTrial = GiB
	b := NewBackend(card)
	max := w.TrueMax(card, 1, 1, 1000, 1)
	if r := runTrial(t, card, w, max, "BATCHFIT_TRIAL=1"); r.code != 0 {
		t.Fatalf("trial 1 at max: exit %d, %s", r.code, r.stderr)
	}
	if used, _ := b.UsedMemory(0); used != GiB {
		t.Errorf("after trial 1 the card holds %d, want the 1 GiB it leaked", used)
	}
	if procs, _ := b.ProcessMemory(0); len(procs) != 0 {
		t.Errorf("leaked memory attributed to processes: %v", procs)
	}
	// Trial 3 finds 2 GiB already used: 20 fewer samples fit.
	r := runTrial(t, card, w, max-15, "BATCHFIT_TRIAL=3")
	if r.code != 1 || !r.event(t).OOM {
		t.Errorf("trial 3 below the clean max: exit %d, %s", r.code, r.stderr)
	}
	if used, _ := b.UsedMemory(0); used != 3*GiB {
		t.Errorf("after trial 3 the card holds %d, want 3 GiB", used)
	}
	if r := runTrial(t, card, w, max-25, "BATCHFIT_TRIAL=3"); r.code != 0 {
		t.Errorf("trial 3 well below: exit %d, %s", r.code, r.stderr)
	}
}

func TestBackendWithoutState(t *testing.T) {
	b := NewBackend(Card{Name: "x", Total: GiB})
	if procs, err := b.ProcessMemory(0); err != nil || len(procs) != 0 {
		t.Errorf("%v %v", procs, err)
	}
	missing := NewBackend(Card{Name: "x", Total: GiB, Dir: filepath.Join(t.TempDir(), "not-yet")})
	if used, err := missing.UsedMemory(0); err != nil || used != 0 {
		t.Errorf("%v %v", used, err)
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
}

// TestHoldPeak: a child of a HoldPeak card, however short its run, keeps its
// last figure (its peak) on the card as it exits until the backend's
// ProcessMemory has listed it at that figure; UsedMemory releases nothing.
func TestHoldPeak(t *testing.T) {
	for _, tt := range []struct {
		name  string
		batch int
		code  int
	}{
		{"fits", 100, 0},
		{"out of memory", 200, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			card, w := testCard(t), testWorkload()
			card.HoldPeak = true
			w.StepSleep = 0
			b := NewBackend(card)
			cmd, report, stdout, stderr := trialCmd(t, card, w, tt.batch)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			pid := cmd.Process.Pid
			state := stateDir(card.Dir)
			for !state.held(pid) {
				select {
				case err := <-exited:
					t.Fatalf("the child exited without waiting for the backend (%v): %s", err, stderr)
				case <-time.After(time.Millisecond):
				}
			}
			held, err := b.UsedMemory(0)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := b.UsedMemory(0); again != held || !state.held(pid) {
				t.Fatalf("UsedMemory released the child, or its figure moved: %d, then %d", held, again)
			}
			listed, err := b.ProcessMemory(0)
			if err != nil || listed[pid] != held {
				t.Fatalf("ProcessMemory = %v, %v; want pid %d at %d", listed, err, pid, held)
			}
			r := finish(t, cmd, <-exited, report, stdout, stderr)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d: %s", r.code, tt.code, r.stderr)
			}
			// What was held is the peak the child reports.
			if ev := r.event(t); held != w.Context+ev.MaxReserved {
				t.Errorf("held %d, want the context and the reserved peak, %d", held, w.Context+ev.MaxReserved)
			}
			if _, _, device := w.Peak(tt.batch); tt.code == 0 && held != device {
				t.Errorf("held %d, want the peak %d", held, device)
			}
			if entries, _ := os.ReadDir(card.Dir); len(entries) != 1 || entries[0].Name() != "lock" {
				t.Errorf("the child left files behind: %v", entries)
			}
		})
	}
}
