package adapter

import (
	"bytes"
	"errors"
	"github.com/batchfit/batchfit/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// These tests run the real hook in real Python processes; those marked torch
// need torch (Debian's python3-torch is enough: CPU only, torch 1.13).

var (
	pythonOnce             sync.Once
	torchPython, anyPython string
	tried                  []string
)

// findPython returns an interpreter for the hook tests, one with torch when
// needTorch, and skips the test when there is none. BATCHFIT_TEST_PYTHON
// names one explicitly; /usr/bin/python3 comes next because a pyenv python3
// earlier on PATH usually lacks torch.
func findPython(t *testing.T, needTorch bool) string {
	t.Helper()
	testutil.NeedsFull(t, "a Python interpreter")
	pythonOnce.Do(func() {
		candidates := []string{os.Getenv("BATCHFIT_TEST_PYTHON"), "/usr/bin/python3"}
		if p, err := exec.LookPath("python3"); err == nil {
			candidates = append(candidates, p)
		}
		for _, c := range candidates {
			if c == "" {
				continue
			}
			tried = append(tried, c)
			// find_spec, not import: importing torch takes seconds.
			err := exec.Command(c, "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)").Run()
			var exit *exec.ExitError
			switch {
			case err == nil:
				if torchPython == "" {
					torchPython = c
				}
				if anyPython == "" {
					anyPython = c
				}
			case errors.As(err, &exit):
				if anyPython == "" {
					anyPython = c
				}
			}
		}
	})
	switch {
	case needTorch && torchPython == "":
		t.Skipf("no python with torch found (tried %s; set BATCHFIT_TEST_PYTHON or install python3-torch)", strings.Join(tried, ", "))
	case needTorch:
		return torchPython
	case anyPython == "":
		t.Skipf("no python interpreter found (tried %s)", strings.Join(tried, ", "))
	}
	return anyPython
}

type pyRun struct {
	stdout, stderr string
	code           int
	events         []Event
	bad            int
	reportExists   bool
}

// baseEnv is the test process's environment without anything that would
// change how the hook behaves, and without bytecode caches in testdata.
func baseEnv() []string {
	return append(Without(os.Environ(), "PYTHONPATH", ReportEnv, "RANK", "LOCAL_RANK", "PYTHONDONTWRITEBYTECODE"),
		"PYTHONDONTWRITEBYTECODE=1")
}

// runHooked runs python with the adapter installed and a report file set, as
// a trial runs; env adds to the environment.
func runHooked(t *testing.T, python string, env []string, args ...string) pyRun {
	t.Helper()
	hooked, report := hookedEnv(t, env)
	return runPython(t, python, hooked, report, args...)
}

// hookedEnv is the environment of a trial: the test's, with env added, the
// adapter installed in a temporary folder and a report file there, whose
// path it returns too.
func hookedEnv(t *testing.T, env []string) ([]string, string) {
	t.Helper()
	dir := t.TempDir()
	pythonPath, err := Install(filepath.Join(dir, "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.jsonl")
	return Env(append(baseEnv(), env...), pythonPath, report), report
}

func runPython(t *testing.T, python string, env []string, report string, args ...string) pyRun {
	t.Helper()
	cmd := exec.Command(python, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := pyRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", python, err)
	}
	if report != "" {
		_, statErr := os.Stat(report)
		r.reportExists = statErr == nil
		r.events, r.bad, err = Read(report)
		if err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// onlyEvent asserts the report holds exactly one well-formed exit event from
// the process itself.
func onlyEvent(t *testing.T, r pyRun) Event {
	t.Helper()
	if len(r.events) != 1 || r.bad != 0 {
		t.Fatalf("report: %d events, %d bad lines, want 1 event; stdout:\n%s\nstderr:\n%s", len(r.events), r.bad, r.stdout, r.stderr)
	}
	ev := r.events[0]
	if ev.Version != 1 || ev.Event != "exit" || ev.PID <= 0 {
		t.Errorf("event header = %+v, want version 1 exit with a pid", ev)
	}
	return ev
}

func testdata(name string) string { return filepath.Join("testdata", name) }

func TestHookWithoutTorch(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	for _, tc := range []struct {
		mode      string
		code      int
		exception string
	}{
		{"ok", 0, ""},
		{"exit3", 3, ""},
		{"raise", 1, "ValueError: boom"},
		{"own-excepthook", 1, "KeyError: 'lost'"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			r := runHooked(t, py, nil, testdata("notorch.py"), tc.mode)
			if r.code != tc.code {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "torch imported: False\n") {
				t.Errorf("torch was imported, or the program's atexit did not run; stdout:\n%s", r.stdout)
			}
			if !strings.Contains(r.stdout, "hook loaded: True\n") {
				t.Errorf("hook not loaded; stdout:\n%s", r.stdout)
			}
			ev := onlyEvent(t, r)
			if ev.Exception != tc.exception || ev.OOM || ev.Torch != "" || ev.Steps != 0 {
				t.Errorf("event = %+v, want exception %q, no oom, no torch, no steps", ev, tc.exception)
			}
		})
	}
}

func TestHookForkedChildDoesNotReport(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	r := runHooked(t, py, nil, testdata("notorch.py"), "fork")
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	onlyEvent(t, r)
}

func TestHookRank(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	r := runHooked(t, py, []string{"LOCAL_RANK=3"}, testdata("notorch.py"))
	if ev := onlyEvent(t, r); ev.Rank != 3 {
		t.Errorf("rank = %d, want 3 (from LOCAL_RANK)", ev.Rank)
	}
}

func TestHookSilentWithoutReportEnv(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	dir := t.TempDir()
	pythonPath, err := Install(filepath.Join(dir, "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	r := runPython(t, py, Env(baseEnv(), pythonPath, ""), "", testdata("notorch.py"))
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "hook loaded: False\n") {
		t.Errorf("the hook loaded without %s; stdout:\n%s", ReportEnv, r.stdout)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("files appeared beside the adapter: %v", entries)
	}
}

func TestHookChainsUserSitecustomize(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	usersite, err := filepath.Abs(testdata("usersite"))
	if err != nil {
		t.Fatal(err)
	}
	r := runHooked(t, py, []string{"PYTHONPATH=" + usersite}, testdata("usersite_main.py"))
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"user sitecustomize ran\n",
		filepath.Join("usersite", "sitecustomize.py") + "\n",
		"user path kept: True\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	onlyEvent(t, r)
}

func TestHookTorchSteps(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	const steps = 4
	hooked := runHooked(t, py, nil, testdata("train.py"), "4")
	if hooked.code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", hooked.code, hooked.stderr)
	}
	ev := onlyEvent(t, hooked)
	if ev.Torch == "" || ev.Exception != "" || ev.OOM {
		t.Errorf("event = %+v, want a torch version, no exception", ev)
	}
	if ev.Steps != steps || len(ev.StepTimes) != steps-1 {
		t.Errorf("steps = %d with %d step times, want %d and %d", ev.Steps, len(ev.StepTimes), steps, steps-1)
	}
	for _, d := range ev.StepTimes {
		if d <= 0 {
			t.Errorf("step time %v, want > 0", d)
		}
	}
	// Without CUDA there are no memory figures.
	if ev.CUDAInitialized || ev.MaxAllocated != 0 || ev.Device != "" {
		t.Errorf("event = %+v, want no CUDA figures on CPU", ev)
	}

	// The hook must not change what the program prints.
	plain := runPython(t, py, baseEnv(), "", testdata("train.py"), "4")
	if plain.code != 0 {
		t.Fatalf("exit code without hook %d; stderr:\n%s", plain.code, plain.stderr)
	}
	if hooked.stdout != plain.stdout || hooked.stderr != plain.stderr {
		t.Errorf("output differs with the hook:\n--- with\n%s%s--- without\n%s%s", hooked.stdout, hooked.stderr, plain.stdout, plain.stderr)
	}
}

func TestHookTorchOOM(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	for _, tc := range []struct {
		mode, exception string
	}{
		{"uncaught", "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"},
		{"chained", "RuntimeError: training failed"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			r := runHooked(t, py, nil, testdata("oom.py"), tc.mode)
			if r.code != 1 {
				t.Errorf("exit code = %d, want 1", r.code)
			}
			ev := onlyEvent(t, r)
			if !ev.OOM || !strings.HasSuffix(ev.Exception, tc.exception) || ev.Torch == "" {
				t.Errorf("event = %+v, want oom with exception ending %q", ev, tc.exception)
			}
			// The program's own traceback still reaches stderr.
			if !strings.Contains(r.stderr, "Traceback") {
				t.Errorf("stderr lacks the traceback:\n%s", r.stderr)
			}
		})
	}
}

// A stand-in torch (testdata/faketorch) takes the hook down its torch 2 and
// CUDA paths on any machine.
func TestHookFakeTorchCUDA(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	fake, err := filepath.Abs(testdata("faketorch"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cuda bool
		args []string
	}{
		{"cpu", false, nil},
		{"cuda", true, nil},
		{"cuda oom", true, []string{"oom"}},
		{"probed before import", true, []string{"probe"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := []string{"PYTHONPATH=" + fake, "FAKE_CUDA=0"}
			if tc.cuda {
				env[1] = "FAKE_CUDA=1"
			}
			r := runHooked(t, py, env, append([]string{testdata("faketrain.py")}, tc.args...)...)
			oom := slices.Contains(tc.args, "oom")
			if (r.code != 0) != oom {
				t.Fatalf("exit code %d; stderr:\n%s", r.code, r.stderr)
			}
			ev := onlyEvent(t, r)
			// Only the first optimizer's steps count; CUDA is synchronized
			// once per counted step, and only when initialized.
			wantSync := 0
			if tc.cuda {
				wantSync = 3
			}
			if want := "synchronized: " + strconv.Itoa(wantSync) + "\n"; r.stdout != want {
				t.Errorf("stdout = %q, want %q", r.stdout, want)
			}
			want := Event{Version: 1, Event: "exit", PID: ev.PID, Torch: "2.99.0+fake", Steps: 3, StepTimes: ev.StepTimes,
				Sources: ev.Sources, Packages: ev.Packages} // TestHookReportsLoadedSources checks them
			if tc.cuda {
				want.CUDAInitialized, want.DeviceIndex, want.Device, want.DeviceTotal = true, 1, "Fake H200", 150109880320
				want.MaxAllocated, want.MaxReserved = 25542543872, 25767706624
				want.Framework = "torch"
				want.StepPeaks = []uint64{25542543872, 25542543872, 25542543872}
			}
			if oom {
				want.OOM, want.Exception = true, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"
			}
			if !reflect.DeepEqual(ev, want) || len(ev.StepTimes) != 2 {
				t.Errorf("event =\n%+v, want\n%+v with 2 step times", ev, want)
			}
		})
	}
}

// An uncaught exception's traceback reaches stderr as it would without the
// hook, and the exit status stays the same.
func TestHookKeepsTraceback(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	hooked := runHooked(t, py, nil, testdata("notorch.py"), "raise")
	plain := runPython(t, py, baseEnv(), "", testdata("notorch.py"), "raise")
	if hooked.stderr != plain.stderr || hooked.code != plain.code {
		t.Errorf("with the hook: exit %d, stderr:\n%s\nwithout: exit %d, stderr:\n%s", hooked.code, hooked.stderr, plain.code, plain.stderr)
	}
	if !strings.Contains(plain.stderr, "ValueError: boom") {
		t.Errorf("no traceback in stderr:\n%s", plain.stderr)
	}
}

// TestHookReportsLoadedSources: the exit event names the script and the
// helper module it imported, not the standard library nor the adapter.
func TestHookReportsLoadedSources(t *testing.T) {
	python := findPython(t, false)
	dir := t.TempDir()
	script := filepath.Join(dir, "main.py")
	helper := filepath.Join(dir, "helper.py")
	if err := os.WriteFile(helper, []byte("X = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("import json, helper\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := onlyEvent(t, runHooked(t, python, nil, script))
	var paths []string
	for _, s := range ev.Sources {
		paths = append(paths, s.Path)
	}
	if len(paths) != 2 || paths[0] != script || paths[1] != helper {
		t.Fatalf("sources = %q, want the script then its helper", paths)
	}
	if ev.Sources[1].Size != 6 || ev.Sources[1].MTimeNS == 0 || ev.SourcesTruncated {
		t.Fatalf("helper = %+v (truncated %v), want its size and mtime", ev.Sources[1], ev.SourcesTruncated)
	}
}

// TestHookReportsOpenedFiles: the exit event names the files the program
// opened for reading (a config file at a fixed path, through open() and
// os.open), in the order first opened, and not what it wrote, what it
// loaded as a module, what it only streamed past the size bound, the
// standard library's, /proc's, nor torch's compiled-kernel caches.
func TestHookReportsOpenedFiles(t *testing.T) {
	python := findPython(t, false)
	dir := t.TempDir()
	files := map[string]string{
		"helper.py":                     "X = 1\n",
		"config.json":                   `{"limit": 100}`,
		"limit.cfg":                     "100\n",
		"big.bin":                       strings.Repeat("x", 1<<20+1),
		"torchinductor_me/fx/kernel.py": "# a compiled kernel\n",
		".triton/cache/k.json":          "{}",
		"main.py": `import json, os, helper
os.chdir(os.path.dirname(os.path.abspath(__file__)))
with open("config.json") as f:
    json.load(f)
os.close(os.open("limit.cfg", os.O_RDONLY))
with open("config.json") as f:
    f.read()
with open("out.txt", "w") as f:
    f.write("x")
with open("big.bin", "rb") as f:
    f.read(1)
with open("/proc/self/status") as f:
    f.read()
with open(json.__file__) as f:
    f.read()
for cached in ("torchinductor_me/fx/kernel.py", ".triton/cache/k.json"):
    with open(cached) as f:
        f.read()
`,
	}
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ev := onlyEvent(t, runHooked(t, python, nil, filepath.Join(dir, "main.py")))
	var paths []string
	for _, s := range ev.Opened {
		paths = append(paths, s.Path)
	}
	want := []string{filepath.Join(dir, "config.json"), filepath.Join(dir, "limit.cfg")}
	if !slices.Equal(paths, want) {
		t.Fatalf("opened = %q, want %q", paths, want)
	}
	if ev.Opened[0].Size != int64(len(files["config.json"])) || ev.Opened[0].MTimeNS == 0 {
		t.Fatalf("config.json = %+v, want its size and mtime", ev.Opened[0])
	}
}

// TestHookReportsPackages: the exit event names the top-level packages
// imported from site-packages (what a fork server may preload), never the
// program's own modules or the standard library.
func TestHookReportsPackages(t *testing.T) {
	python := findPython(t, false)
	dir := t.TempDir()
	site := filepath.Join(dir, "site-packages", "thirdparty", "sub")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		filepath.Join(site, "..", "__init__.py"): "",
		filepath.Join(site, "__init__.py"):       "",
		filepath.Join(dir, "helper.py"):          "X = 1\n",
		filepath.Join(dir, "main.py"):            "import json, helper, thirdparty.sub\n",
	} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(baseEnv(), "PYTHONPATH="+filepath.Join(dir, "site-packages"))
	ev := onlyEvent(t, runHooked(t, python, env, filepath.Join(dir, "main.py")))
	if !slices.Contains(ev.Packages, "thirdparty") || slices.Contains(ev.Packages, "helper") ||
		slices.Contains(ev.Packages, "json") || slices.Contains(ev.Packages, "batchfit") {
		t.Fatalf("packages = %q, want thirdparty and no program, stdlib or batchfit module", ev.Packages)
	}
}

// A trial that runs beside others is held to its share of the CPUs, whether
// torch loads after the hook (a fresh trial) or before it (a forked one).
func TestHookSharesCPUs(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	share := CPUThreadsEnv + "=1"
	fresh := runHooked(t, py, []string{share}, "-c", "import os, torch; print(os.environ.get('OMP_NUM_THREADS'), torch.get_num_threads())")
	if got := strings.TrimSpace(fresh.stdout); fresh.code != 0 || got != "1 1" {
		t.Errorf("fresh trial: %q (exit %d), want OMP_NUM_THREADS 1 and one torch thread; stderr:\n%s", got, fresh.code, fresh.stderr)
	}
	dir := t.TempDir()
	pythonPath, err := Install(filepath.Join(dir, "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	forked := runPython(t, py, append(baseEnv(), "PYTHONPATH="+pythonPath), "", "-c", `
import os, torch
os.environ["`+ReportEnv+`"] = "`+filepath.Join(dir, "report.jsonl")+`"
os.environ["`+CPUThreadsEnv+`"] = "1"
from batchfit import hook
hook.install()
print(torch.get_num_threads())`)
	if got := strings.TrimSpace(forked.stdout); forked.code != 0 || got != "1" {
		t.Errorf("torch loaded before the hook: %q threads (exit %d), want 1; stderr:\n%s", got, forked.code, forked.stderr)
	}
}

// A report the hook cannot write is said on stderr in the words batchfit
// reads back (ReportFailedPrefix, ParseReportFailure), not lost in
// silence: /dev/full refuses every write with ENOSPC, as a full disk does.
func TestHookSaysReportNotWritten(t *testing.T) {
	python := findPython(t, false)
	pythonPath, err := Install(filepath.Join(t.TempDir(), "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	r := runPython(t, python, Env(baseEnv(), pythonPath, "/dev/full"), "", "-c", "print('trained')")
	if r.code != 0 || r.stdout != "trained\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var said []string
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(line, ReportFailedPrefix) {
			said = append(said, line)
		}
	}
	if len(said) != 1 {
		t.Fatalf("stderr %q, want one line saying the report was not written", r.stderr)
	}
	e, ok := ParseReportFailure(said[0])
	if !ok || e.Path != "/dev/full" || !errors.Is(e, syscall.ENOSPC) {
		t.Errorf("ParseReportFailure(%q) = %+v, %v; want /dev/full, ENOSPC", said[0], e, ok)
	}
}
