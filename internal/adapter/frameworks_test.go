package adapter

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// These tests run the real hook with stand-ins for JAX, TensorFlow and
// torch's CUDA allocator (testdata/fakejax, faketf, faketorch), which mimic
// the few parts of their APIs the hook uses: neither JAX nor TensorFlow can
// be installed on the build machines.

const mib = 1 << 20

// standIns is a PYTHONPATH holding the stand-ins named ("fakejax", ...).
func standIns(t *testing.T, names ...string) string {
	t.Helper()
	var dirs []string
	for _, n := range names {
		d, err := filepath.Abs(testdata(n))
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	return "PYTHONPATH=" + strings.Join(dirs, string(os.PathListSeparator))
}

func TestHookJAX(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	device := func(peak, limit uint64) []DeviceMemory {
		return []DeviceMemory{{Index: 0, Peak: peak, Limit: limit, Pool: limit}}
	}
	for _, tc := range []struct {
		name string
		env  []string
		mode string
		code int
		want Event // its memory, framework and OOM fields
	}{
		{"75 % of the card by default", nil, "ok", 0,
			Event{Framework: "jax", MemoryLimit: 768 * mib, MaxAllocated: 400 * mib, Devices: device(400*mib, 768*mib)}},
		{"the fraction batchfit sets", JAX{}.LimitEnv(nil, 512*mib, 1024*mib), "ok", 0,
			Event{Framework: "jax", MemoryLimit: 512 * mib, MaxAllocated: 400 * mib, Devices: device(400*mib, 512*mib)}},
		{"an OOM ends the program", nil, "oom", 1,
			Event{Framework: "jax", MemoryLimit: 768 * mib, MaxAllocated: 400 * mib, Devices: device(400*mib, 768*mib),
				OOM: true, Exception: "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2097152000 bytes.",
				OOMRequests: []OOMRequest{{Device: 0, Bytes: 2000 * mib}}}},
		{"OOMs caught, exit 0", nil, "caught", 0,
			Event{Framework: "jax", MemoryLimit: 768 * mib, MaxAllocated: 600 * mib, Devices: device(600*mib, 768*mib),
				OOMsCaught: 2, OOMRequests: []OOMRequest{{Device: 0, Bytes: 2000 * mib}, {Device: 0, Bytes: 1000 * mib}}}},
		{"OOMs caught, exit 3", nil, "caught-exit3", 3,
			Event{Framework: "jax", MemoryLimit: 768 * mib, MaxAllocated: 600 * mib, Devices: device(600*mib, 768*mib),
				OOMsCaught: 2, OOMRequests: []OOMRequest{{Device: 0, Bytes: 2000 * mib}, {Device: 0, Bytes: 1000 * mib}}}},
		{"an OOM re-raised as another error", nil, "chained", 1,
			Event{Framework: "jax", MemoryLimit: 768 * mib, MaxAllocated: 400 * mib, Devices: device(400*mib, 768*mib),
				OOM: true, Exception: "ValueError: step failed", OOMRequests: []OOMRequest{{Device: 0, Bytes: 2000 * mib}}}},
		{"imported, never used", nil, "import-only", 0, Event{}},
		{"on the CPU", []string{"FAKE_JAX_CPU=1"}, "ok", 0, Event{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := append([]string{standIns(t, "fakejax")}, tc.env...)
			r := runHooked(t, py, env, testdata("jaxtrain.py"), tc.mode)
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			// The stand-in's own atexit handler, registered as jax was
			// imported, tears the backend down after the hook has read it;
			// the hook must not start a backend the program did not.
			started := tc.mode != "import-only"
			if want := "backend started: " + map[bool]string{true: "True", false: "False"}[started] + "\n"; !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
			checkFrameworkFields(t, onlyEvent(t, r), tc.want)
		})
	}
}

func TestHookTensorFlow(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	limited := TensorFlow{}.LimitEnv(nil, 256*mib, 0)
	devices := func(limit uint64) []DeviceMemory {
		return []DeviceMemory{{Index: 0, Peak: 192 * mib, Limit: limit}, {Index: 1, Peak: 64 * mib, Limit: limit}}
	}
	for _, tc := range []struct {
		name    string
		env     []string
		mode    string
		code    int
		created string // the limit the devices were created with, "" for none created
		want    Event
	}{
		{"limited before devices exist", limited, "ok", 0, "256",
			Event{Framework: "tensorflow", MaxAllocated: 192 * mib, MemoryLimit: 256 * mib, Devices: devices(256 * mib)}},
		{"without a limit", nil, "ok", 0, "1024",
			Event{Framework: "tensorflow", MaxAllocated: 192 * mib, Devices: devices(0)}},
		{"an OOM ends the program", limited, "oom", 1, "256",
			Event{Framework: "tensorflow", MaxAllocated: 192 * mib, MemoryLimit: 256 * mib, Devices: devices(256 * mib), OOM: true,
				Exception:   "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[1024,1024,1024] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
				OOMRequests: []OOMRequest{{Device: 0, Bytes: 4 << 30}}}},
		{"an OOM caught", limited, "caught", 0, "256",
			Event{Framework: "tensorflow", MaxAllocated: 192 * mib, MemoryLimit: 256 * mib, Devices: devices(256 * mib),
				OOMsCaught: 1, OOMRequests: []OOMRequest{{Device: 0, Bytes: 4 << 30}}}},
		{"imported, never used", limited, "import-only", 0, "", Event{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := append([]string{standIns(t, "faketf"), "FAKE_TF_GPUS=2"}, tc.env...)
			r := runHooked(t, py, env, testdata("tftrain.py"), tc.mode)
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			for i := range 2 {
				line := "created /physical_device:GPU:" + string(rune('0'+i)) + " with a limit of " + tc.created + " MiB\n"
				if tc.created == "" && strings.Contains(r.stdout, "created") {
					t.Errorf("devices were created at exit:\n%s", r.stdout)
				} else if tc.created != "" && !strings.Contains(r.stdout, line) {
					t.Errorf("stdout lacks %q:\n%s", line, r.stdout)
				}
			}
			checkFrameworkFields(t, onlyEvent(t, r), tc.want)
		})
	}
}

// torch's allocator observer reports every refused request, those torch's
// C++ catches itself too; only those that reach Python count as OOMs.
func TestHookTorchOOMObserver(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	inside := OOMRequest{Device: 1, Bytes: 512 * mib, Limit: 24 << 30, Free: mib}
	refused := OOMRequest{Device: 1, Bytes: 2 << 30, Limit: 24 << 30, Free: mib}
	for _, tc := range []struct {
		mode   string
		code   int
		oom    bool
		caught int
		reqs   []OOMRequest
	}{
		{"uncaught", 1, true, 0, []OOMRequest{inside, refused}},
		{"caught", 0, false, 1, []OOMRequest{inside, refused}},
		{"caught-exit3", 3, false, 1, []OOMRequest{inside, refused}},
		{"internal", 0, false, 0, []OOMRequest{inside}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			r := runHooked(t, py, []string{standIns(t, "faketorch"), "FAKE_CUDA=0"}, testdata("torchoom.py"), tc.mode)
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			if tc.mode != "uncaught" && !strings.Contains(r.stdout, "attached before init: False\n") {
				// Attaching the observer initialises CUDA in real torch.
				t.Errorf("the observer was attached before CUDA was initialised:\n%s", r.stdout)
			}
			ev := onlyEvent(t, r)
			if ev.OOM != tc.oom || ev.OOMsCaught != tc.caught || !reflect.DeepEqual(ev.OOMRequests, tc.reqs) || ev.Framework != "torch" {
				t.Errorf("event = %+v, want oom %v, %d caught, requests %+v, framework torch", ev, tc.oom, tc.caught, tc.reqs)
			}
		})
	}
}

func TestHookTorchOOMCaught(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	r := runHooked(t, py, nil, testdata("oom.py"), "caught")
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if ev := onlyEvent(t, r); ev.OOM || ev.OOMsCaught != 1 || ev.Exception != "" {
		t.Errorf("event = %+v, want one OOM caught", ev)
	}
}

// The hook watches for every framework but imports none, even when the
// program looks for them as libraries do and every limit is set.
func TestHookImportsNoFramework(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	env := Python{}.LimitEnv([]string{standIns(t, "faketorch", "fakejax", "faketf")}, 512*mib, 1024*mib)
	r := runHooked(t, py, env, testdata("notorch.py"), "probe")
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"torch installed: True\n", "jax installed: True\n", "tensorflow installed: True\n",
		"torch imported: False\n", "jax imported: False\n", "tensorflow imported: False\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if ev := onlyEvent(t, r); ev.Framework != "" || ev.Devices != nil || ev.OOMsCaught != 0 {
		t.Errorf("event = %+v, want no framework figures", ev)
	}
}

// checkFrameworkFields compares the fields this adapter's framework support
// adds, and the memory and OOM fields it fills.
func checkFrameworkFields(t *testing.T, ev, want Event) {
	t.Helper()
	got := Event{
		Framework: ev.Framework, Devices: ev.Devices, MemoryLimit: ev.MemoryLimit, MaxAllocated: ev.MaxAllocated,
		OOM: ev.OOM, Exception: ev.Exception, OOMsCaught: ev.OOMsCaught, OOMRequests: ev.OOMRequests,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("event =\n%+v, want\n%+v", got, want)
	}
}
