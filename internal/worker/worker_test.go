package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
)

// The real worker on CPU torch: hello, trials, an OOM whose step's tensors
// are all freed, an error that is not about memory, the Trial's own output,
// and finally a worker that dies during a trial. One worker, because each
// one imports torch.
func TestRealWorker(t *testing.T) {
	t.Parallel()
	w := startTorch(t, "trials:Noisy", "TRIAL_OOM_ABOVE=100", "TRIAL_ERROR_AT=5", "TRIAL_DIE_AT=9")
	h := w.Hello()
	if h.Version != ProtocolVersion || h.PID != w.PID() || h.Torch == "" || h.Device != "cpu" || h.CUDA || h.Target != "trials:Noisy" {
		t.Errorf("hello = %+v", h)
	}
	if h.Verify != "python_tensors" || h.BaselineTensorBytes == 0 {
		t.Errorf("without CUDA the reset is verified by the tensor census: %+v", h)
	}
	if h.WarmupSize != 1 || h.WarmupSteps < 1 || h.Optimizers != 1 || h.OptimizerStateBytes == 0 {
		t.Errorf("the warm-up must have made Adam's state: %+v", h)
	}
	if !slices.Contains(h.Packages, "torch") {
		t.Errorf("packages %q, want torch among them (what a fork server preloads)", h.Packages)
	}

	res := runTrial(t, w, 8, 3)
	if res.Outcome != classify.OK || len(res.StepSeconds) != 3 || !res.Verified || res.RetainedBytes != 0 {
		t.Errorf("trial = %+v", res)
	}
	if res.OptimizerStateCreated || res.WorkerPID != w.PID() || res.ID != 1 || res.WorkerGone {
		t.Errorf("trial = %+v", res)
	}

	oom := runTrial(t, w, 200, 2)
	if oom.Outcome != classify.OOM || !strings.Contains(oom.Exception, "OutOfMemoryError") || oom.ID != 2 {
		t.Errorf("oom trial = %+v", oom)
	}
	if !oom.Verified || oom.RetainedBytes != 0 {
		t.Errorf("the reset after the OOM must verify: %+v", oom)
	}
	if check := runTrial(t, w, 777, 1); check.Outcome != classify.OK {
		t.Errorf("tensors of the failed step survived the reset: %s %s", check.Exception, check.Traceback)
	}

	bad := runTrial(t, w, 5, 1)
	if bad.Outcome != classify.Crash || bad.Exception != `KeyError: "no such column: 'label'"` {
		t.Errorf("outcome %s, exception %q", bad.Outcome, bad.Exception)
	}
	if !strings.Contains(bad.Traceback, "Traceback") || !strings.Contains(bad.Tail, "KeyError") || bad.WorkerGone {
		t.Errorf("result = %+v", bad)
	}
	if ok := runTrial(t, w, 4, 1); ok.Outcome != classify.OK {
		t.Errorf("the worker must go on after an error: %+v", ok)
	}

	died := runTrial(t, w, 9, 1)
	if died.Outcome != classify.Crash || !died.WorkerGone || !strings.Contains(died.Reason, "exit status 3") ||
		!strings.Contains(died.Tail, "dying on purpose") {
		t.Errorf("result = %+v", died)
	}
	if alive(w.PID()) {
		t.Errorf("worker %d still alive", w.PID())
	}
	if _, err := w.Trial(context.Background(), 4, 1, time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("a trial on a dead worker: %v", err)
	}

	stdout, stderr := w.Logs()
	out, _ := os.ReadFile(stdout)
	errs, _ := os.ReadFile(stderr)
	if !strings.Contains(string(out), `"type": "result"`) || !strings.Contains(string(errs), "noisy stderr") {
		t.Errorf("stdout %q, stderr %q", out, errs)
	}
}

// The failed step's batch, output and loss are freed even when the Trial
// holds on to the exception, whose traceback would keep the failed step's
// frames (testdata/trials.py Careless, loaded by its file's path, at 300).
// When the step retries inside the except block instead, as an in-process
// search does (at 200), the exception never reaches the worker: the failed
// attempt's tensors stay alive, and verification says so.
func TestOOMReleasesTheFailedStep(t *testing.T) {
	t.Parallel()
	abs, _ := filepath.Abs("testdata/trials.py")
	w := startTorch(t, abs+":Careless", "TRIAL_OOM_ABOVE=100", "TRIAL_RETRY_AT=200")

	res := runTrial(t, w, 300, 2)
	if res.Outcome != classify.OOM || !res.Verified || res.RetainedBytes != 0 || len(res.RetainedTensors) != 0 {
		t.Errorf("a kept exception's frames must be cleared: %+v", res)
	}
	if check := runTrial(t, w, 777, 1); check.Outcome != classify.OK {
		t.Errorf("tensors of the failed step survived the reset: %s %s", check.Exception, check.Traceback)
	}

	res = runTrial(t, w, 200, 1)
	if res.Outcome != classify.OK || res.Verified || res.RetainedBytes < 200*16*4 {
		t.Errorf("the retried step's first attempt must be found alive: %+v", res)
	}
	if len(res.RetainedTensors) == 0 || res.RetainedTensors[0].Shape[0] != 200 {
		t.Errorf("retained tensors = %+v", res.RetainedTensors)
	}
	check := runTrial(t, w, 777, 1)
	if check.Outcome != classify.Crash || !strings.Contains(check.Exception, "batch 200") {
		t.Errorf("the first attempt's batch must still be alive: %+v", check)
	}
}

// A Trial that keeps the failed batch on self: the reset cannot free it,
// and the worker says how much is left and what it is.
func TestLeakIsMeasured(t *testing.T) {
	t.Parallel()
	w := startTorch(t, "trials:KeepsFailedBatch", "TRIAL_OOM_ABOVE=100")
	res := runTrial(t, w, 200, 1)
	if res.Outcome != classify.OOM {
		t.Fatalf("outcome %s: %+v", res.Outcome, res)
	}
	if res.Verified {
		t.Errorf("a kept batch must fail verification: %+v", res)
	}
	if want := int64(200 * 16 * 4); res.RetainedBytes != want {
		t.Errorf("retained %d bytes, want %d (the float32 200x16 batch)", res.RetainedBytes, want)
	}
	if len(res.RetainedTensors) != 1 || res.RetainedTensors[0].Bytes != 200*16*4 || len(res.RetainedTensors[0].Shape) != 2 ||
		res.RetainedTensors[0].Shape[0] != 200 || res.RetainedTensors[0].DType != "float32" {
		t.Errorf("retained tensors = %+v", res.RetainedTensors)
	}
	check := runTrial(t, w, 777, 1)
	if check.Outcome != classify.Crash || !strings.Contains(check.Exception, "batch 200") {
		t.Errorf("the weak reference to the kept batch must be alive: %+v", check)
	}
}

// Without a warm-up, Adam's state appears during the first trial; the
// worker reports it and the reset does not verify.
func TestOptimizerStateCreatedDuringATrial(t *testing.T) {
	t.Parallel()
	w := startTorch(t, "trials:Clean", WarmupEnv+"=0")
	if h := w.Hello(); h.WarmupSteps != 0 || h.OptimizerStateBytes != 0 {
		t.Fatalf("hello = %+v", h)
	}
	res := runTrial(t, w, 8, 1)
	if !res.OptimizerStateCreated || res.OptimizerStateBytes == 0 {
		t.Errorf("optimizer state created = %v (%d bytes)", res.OptimizerStateCreated, res.OptimizerStateBytes)
	}
	if res.Verified || res.RetainedBytes != int64(res.OptimizerStateBytes) {
		t.Errorf("retained %d, want the optimizer state's %d: %+v", res.RetainedBytes, res.OptimizerStateBytes, res)
	}
}

// Functions at module level, and a Trial that needs no torch at all.
func TestModuleAndNoTorch(t *testing.T) {
	t.Parallel()
	w := startTorch(t, "trials")
	if res := runTrial(t, w, 4, 2); res.Outcome != classify.OK || !res.Verified {
		t.Errorf("trial = %+v", res)
	}
	plain := startTorch(t, "notorch_trials:Plain")
	if h := plain.Hello(); h.Torch != "" || h.Optimizers != 0 {
		t.Errorf("hello = %+v", h)
	}
	if res := runTrial(t, plain, 4, 1); res.Outcome != classify.OK || !res.Verified {
		t.Errorf("trial = %+v", res)
	}
}

// A hung step: killed at the timeout, classified; Go does not hang.
func TestHungStep(t *testing.T) {
	w, err := startFake(t, "hang")
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Trial(context.Background(), 9, 1, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != classify.Timeout || !res.WorkerGone || alive(w.PID()) {
		t.Errorf("result = %+v", res)
	}
	if _, err := w.Trial(context.Background(), 4, 1, time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("a trial on a killed worker: %v", err)
	}
}

func TestSetupFailure(t *testing.T) {
	py := findPython(t, false)
	_, err := Start(context.Background(), []string{py, "-m", "batchfit.worker", "notorch_trials:BadSetup"}, testEnv(t), logOpts(t))
	var se *StartError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v", err)
	}
	if se.Stage != "setup" || se.Exception != "ValueError: cannot read the dataset config" ||
		!strings.Contains(se.Traceback, "raise ValueError") || se.Status != "exit status 1" {
		t.Errorf("start error = %+v", se)
	}
	_, err = Start(context.Background(), []string{py, "-m", "batchfit.worker", "notorch_trials:Nothing"}, testEnv(t), logOpts(t))
	if !errors.As(err, &se) || !strings.Contains(se.Exception, "has no attribute 'Nothing'") {
		t.Errorf("err = %v", err)
	}
	// Without the batchfit package on PYTHONPATH the worker never runs; its
	// exit status and stderr say why.
	_, err = Start(context.Background(), []string{py, "-m", "batchfit.worker", "trials:Clean"}, []string{"PATH=" + os.Getenv("PATH")}, logOpts(t))
	if !errors.As(err, &se) || se.Stage != "hello" || se.Status != "exit status 1" || !strings.Contains(se.Tail, "No module named") {
		t.Errorf("err = %v (%+v)", err, se)
	}
}

// Workers that break the protocol, with no torch involved.
func TestProtocolErrors(t *testing.T) {
	for _, tc := range []struct {
		mode, reason, tail string
	}{
		{"garbage", "worker protocol error: not a JSON object", ""},
		{"wrongid", "a result for trial 2 while trial 1 runs", ""},
		{"noverify", "no verified field", ""},
		{"die", "exit status 7", "segfault coming"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			w, err := startFake(t, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			res, err := w.Trial(context.Background(), 8, 1, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != classify.Crash || !res.WorkerGone || !strings.Contains(res.Reason, tc.reason) || !strings.Contains(res.Tail, tc.tail) {
				t.Errorf("result = %+v", res)
			}
			if alive(w.PID()) {
				t.Errorf("worker %d still alive", w.PID())
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	for _, tc := range []struct {
		mode, stage, text string
		timeout           time.Duration
	}{
		{"fatal", "setup", "ValueError: cannot read the dataset config", 20 * time.Second},
		{"exitearly", "hello", "exited before it was ready", 20 * time.Second},
		{"version", "hello", "protocol version 99", 20 * time.Second},
		{"nohello", "hello", "no hello within", 300 * time.Millisecond},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			py := findPython(t, false)
			opts := logOpts(t)
			opts.StartTimeout = tc.timeout
			pidFile := filepath.Join(t.TempDir(), "child")
			_, err := Start(context.Background(), []string{py, "testdata/fakeworker.py"}, testEnv(t, "FAKE_MODE="+tc.mode, "FAKE_CHILD="+pidFile), opts)
			var se *StartError
			if !errors.As(err, &se) || se.Stage != tc.stage || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v (%+v)", err, se)
			}
			// Nothing of a worker that failed to start is left.
			if b, err := os.ReadFile(pidFile); err == nil {
				child, _ := strconv.Atoi(string(b))
				if alive(child) {
					t.Errorf("child %d still alive", child)
				}
			}
		})
	}
	_, err := Start(context.Background(), []string{"/nonexistent/python"}, nil, Options{})
	var se *StartError
	if !errors.As(err, &se) || se.Stage != "start" {
		t.Errorf("err = %v", err)
	}
}

func TestCancel(t *testing.T) {
	w, err := startFake(t, "hang")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res, err := w.Trial(ctx, 8, 1, time.Minute)
	if err != nil || res.Outcome != classify.Canceled || !res.WorkerGone || alive(w.PID()) {
		t.Errorf("result = %+v, err = %v", res, err)
	}
}

// Close ends the worker and every process of its group.
func TestCloseKillsTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	w, err := startFake(t, "ok", "FAKE_CHILD="+pidFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(string(b))
	if !alive(child) {
		t.Fatal("the child never ran")
	}
	if res := runTrial(t, w, 8, 1); res.Outcome != classify.OK || res.PeakAllocated != 9000 {
		t.Errorf("result = %+v", res)
	}
	w.Close()
	if alive(w.PID()) || alive(child) {
		t.Errorf("worker %d or its child %d still alive", w.PID(), child)
	}
}

// The adapter's stop after BATCHFIT_STEPS steps is for fresh trials: a warm
// worker runs many trials in one process and must never be ended by it, even
// when it is started with the hook loaded and a report file, which batchfit
// itself never gives a worker.
func TestWorkerIgnoresTheStepLimit(t *testing.T) {
	t.Parallel()
	hook := filepath.Join(installDirOf(t), "batchfit", "_hook")
	report := filepath.Join(t.TempDir(), "report.jsonl")
	w := startTorch(t, "trials:Clean", "PYTHONPATH="+hook+string(os.PathListSeparator)+pythonPath(t),
		"BATCHFIT_REPORT="+report, "BATCHFIT_STEPS=1")
	for i := range 2 {
		if res := runTrial(t, w, 4, 3); res.Outcome != classify.OK || len(res.StepSeconds) != 3 || res.WorkerGone {
			t.Fatalf("trial %d = %+v, want ok after 3 steps with the worker alive", i+1, res)
		}
	}
	if !alive(w.PID()) {
		t.Errorf("worker %d is gone", w.PID())
	}
}
