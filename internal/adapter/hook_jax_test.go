package adapter

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// What counts as a JAX step, with the stand-in jax and optax: calls of a
// jitted (or pmapped) function whose trace called an optax update, and
// eager optax updates; see batchfit/_runtime/jax_steps.py.
func TestHookJAXSteps(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	fake, err := filepath.Abs(testdata("fakejaxsteps"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode string
		// done is the program's last line when it runs 5 steps to its end:
		// how often the stand-ins traced, blocked on an array (2 per
		// counted step) and ran an update function.
		done string
		// counted says its steps are counted; if not, it is never stopped.
		counted bool
	}{
		{"jit", "done: traces 3 blocked 10 updates 4", true}, // a second optimizer and an evaluation do not count
		{"rejit", "done: traces 1 blocked 10 updates 2", true},
		{"decorated", "done: traces 1 blocked 10 updates 2", true},
		{"pmap", "done: traces 1 blocked 10 updates 2", true},
		{"nested", "done: traces 2 blocked 10 updates 2", true},
		{"eager", "done: traces 0 blocked 0 updates 10", true},
		{"traced", "done: traces 1 blocked 0 updates 10", false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			env := []string{"PYTHONPATH=" + fake, "FAKE_JAX_PEAK=777"}
			stopped := runHooked(t, py, append(env, "BATCHFIT_STEPS=3"), testdata("fakejaxtrain.py"), tc.mode, "5")
			whole := runHooked(t, py, append(env, "BATCHFIT_STEPS=0"), testdata("fakejaxtrain.py"), tc.mode, "5")
			for _, r := range []pyRun{stopped, whole} {
				if r.code != 0 {
					t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
				}
			}
			steps := "step 1\nstep 2\nstep 3\nstep 4\nstep 5\n"
			if want := steps + tc.done + "\n"; whole.stdout != want {
				t.Errorf("BATCHFIT_STEPS=0: stdout =\n%s\nwant\n%s", whole.stdout, want)
			}
			ev := onlyEvent(t, whole)
			if !tc.counted {
				if ev.Steps != 0 || ev.Stopped || stopped.stdout != whole.stdout {
					t.Errorf("no step should count: event %+v; with BATCHFIT_STEPS=3 it printed\n%s", ev, stopped.stdout)
				}
				return
			}
			if ev.Stopped || ev.Steps != 5 || len(ev.StepTimes) != 4 || !slices.Equal(ev.StepPeaks, []uint64{777, 777, 777, 777, 777}) {
				t.Errorf("BATCHFIT_STEPS=0: event %+v, want 5 steps, 4 step times, 5 peaks of 777, not stopped", ev)
			}
			if want := "step 1\nstep 2\n"; stopped.stdout != want {
				t.Errorf("BATCHFIT_STEPS=3: stdout =\n%s\nwant\n%s", stopped.stdout, want)
			}
			ev = onlyEvent(t, stopped)
			if !ev.Stopped || ev.Steps != 3 || len(ev.StepTimes) != 2 || len(ev.StepPeaks) != 3 {
				t.Errorf("BATCHFIT_STEPS=3: event %+v, want stopped after 3 steps with 2 step times and 3 peaks", ev)
			}
			// The stop leaves through os._exit, before any atexit handler:
			// JAX's memory figures must be in its event all the same.
			if ev.Framework != "jax" || ev.MaxAllocated != 777 || ev.MemoryLimit != 1000 {
				t.Errorf("BATCHFIT_STEPS=3: framework %q, peak %d, limit %d; want jax, 777, 1000", ev.Framework, ev.MaxAllocated, ev.MemoryLimit)
			}
		})
	}
}

// On JAX's CPU backend there are no memory statistics: steps, no peaks.
func TestHookJAXStepsWithoutPeaks(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	fake, err := filepath.Abs(testdata("fakejaxsteps"))
	if err != nil {
		t.Fatal(err)
	}
	r := runHooked(t, py, []string{"PYTHONPATH=" + fake, "BATCHFIT_STEPS=2"}, testdata("fakejaxtrain.py"), "jit")
	ev := onlyEvent(t, r)
	if r.code != 0 || !ev.Stopped || ev.Steps != 2 || ev.StepPeaks != nil {
		t.Errorf("exit code %d, event %+v; want 0, stopped after 2 steps, no peaks", r.code, ev)
	}
}

// The program sees jitted functions and optax transformations as they are
// without the hook: attributes, lower(), signatures, methods, the decorator
// factory, one update function per transformation, read-only fields.
func TestHookJAXProxiesAreTransparent(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	fake, err := filepath.Abs(testdata("fakejaxsteps"))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PYTHONPATH=" + fake}
	hooked := runHooked(t, py, append(env, "BATCHFIT_STEPS=1"), testdata("fakejaxtrain.py"), "proxy")
	plain := runPython(t, py, append(baseEnv(), env...), "", testdata("fakejaxtrain.py"), "proxy")
	if hooked.code != 0 || plain.code != 0 {
		t.Fatalf("exit codes %d (hooked), %d (plain); stderr:\n%s\n%s", hooked.code, plain.code, hooked.stderr, plain.stderr)
	}
	if hooked.stdout != plain.stdout {
		t.Errorf("output differs with the hook:\n--- with\n%s--- without\n%s", hooked.stdout, plain.stdout)
	}
	for _, want := range []string{"name: train_step\n", "unwraps to the function: True\n", "signature: (params, opt_state)\n",
		"lower: module @jit_train_step\n", "method: Array\n", "same update each time: True\n", "unpacked: True True\n",
		"replaced: True\n", "read-only: True\n"} {
		if !strings.Contains(plain.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, plain.stdout)
		}
	}
	if ev := onlyEvent(t, hooked); ev.Steps != 0 || ev.Stopped {
		t.Errorf("event %+v, want no steps", ev)
	}
}

// A jitted step's memory plan, read from the stand-in's compile before its
// first call (batchfit/_runtime/jax_plan.py): recorded when it fits the
// pool (1000 bytes, 1 in use), the trial ended as out of memory before the
// step runs when it needs more than the free memory and the slack (5
// bytes here), and the trace shared with the call.
func TestHookJAXPlan(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	fake, err := filepath.Abs(testdata("fakejaxsteps"))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PYTHONPATH=" + fake, "FAKE_JAX_PEAK=777", "BATCHFIT_STEPS=0"}
	for _, tc := range []struct {
		name, plan string
		need       uint64
		stopped    bool
	}{
		{"fits", "100,50,40,500", 510, false},
		{"within the slack", "100,50,40,993", 1003, false},
		{"does not fit", "100,50,40,995", 1005, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runHooked(t, py, append(env, "FAKE_JAX_PLAN="+tc.plan), testdata("fakejaxtrain.py"), "jit", "3")
			ev := onlyEvent(t, r)
			want := XLAPlan{Arguments: 100, Outputs: 50, Alias: 40, Temp: tc.need - 10, Need: tc.need, InUse: 1, Limit: 1000, Free: 999}
			if ev.Plan == nil || *ev.Plan != want {
				t.Errorf("plan = %+v, want %+v", ev.Plan, want)
			}
			if !tc.stopped {
				if r.code != 0 || ev.PlanStopped || ev.OOM || ev.Steps != 3 {
					t.Errorf("exit %d, event %+v: want 3 steps run, not stopped; stderr:\n%s", r.code, ev, r.stderr)
				}
				if !strings.HasSuffix(r.stdout, "done: traces 3 blocked 6 updates 4\n") {
					t.Errorf("stdout =\n%s\nwant the stand-ins traced once per function", r.stdout)
				}
				return
			}
			if r.code != 1 || !ev.PlanStopped || !ev.OOM || ev.Steps != 0 || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, event %+v: want status 1 before any step, stopped on its plan, OOM", r.code, r.stdout, ev)
			}
			wantReq := OOMRequest{Bytes: 1005, Allocated: 1, Reserved: 1, Limit: 1000, Free: 999}
			if len(ev.OOMRequests) != 1 || ev.OOMRequests[0] != wantReq || ev.OOMsCaught != 0 {
				t.Errorf("requests %+v (%d caught), want [%+v], none caught", ev.OOMRequests, ev.OOMsCaught, wantReq)
			}
			if !strings.Contains(r.stderr, "batchfit adapter: XLA's plan does not fit: ") {
				t.Errorf("stderr does not say why:\n%s", r.stderr)
			}
			sum := Summarize(r.events)
			if sum.Plan == nil || !sum.Plan.Stopped || !sum.OOM {
				t.Errorf("summary plan %+v, OOM %v: want the plan marked stopped", sum.Plan, sum.OOM)
			}
		})
	}
}
