package forkserver

import (
	"context"
	"encoding/json"
	"errors"
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
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/testutil"
	"github.com/batchfit/batchfit/internal/trial"
)

// These tests run the real server (python/batchfit/_runtime/forkserver.py) with a real
// interpreter, and compare each forked trial with the same trial run fresh.

// python is Debian's interpreter, which has torch (CPU); the tests that need
// torch check for it.
func python(t *testing.T) string {
	t.Helper()
	testutil.NeedsFull(t, "a Python fork server")
	for _, p := range []string{os.Getenv("BATCHFIT_TEST_PYTHON"), "/usr/bin/python3"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Skip("no python3")
	return ""
}

func hasTorch(py string) bool { return exec.Command(py, "-c", "import torch").Run() == nil }

// harness makes trial specs as the probe does: the adapter on PYTHONPATH,
// a report file, batchfit's per-trial variables.
type harness struct {
	t      *testing.T
	py     string
	dir    string // logs and reports
	base   []string
	pp     string
	cwd    string
	notice []string
	n      int
	mu     sync.Mutex
}

func newHarness(t *testing.T, extraPath ...string) *harness {
	t.Helper()
	py := python(t)
	dir := t.TempDir()
	pp, err := adapter.Install(filepath.Join(dir, "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	site, _ := filepath.Abs(filepath.Join("testdata", "site-packages"))
	paths := append([]string{site}, extraPath...)
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHON") && !strings.HasPrefix(kv, "BATCHFIT_") {
			base = append(base, kv)
		}
	}
	base = append(base, "PYTHONPATH="+strings.Join(paths, ":"), "PYTHONDONTWRITEBYTECODE=1")
	cwd, _ := filepath.Abs("testdata")
	return &harness{t: t, py: py, dir: dir, base: base, pp: pp, cwd: cwd}
}

func (h *harness) executor() *Executor {
	e := New(Options{LogDir: h.dir, Wait: true, Notice: h.record, Detail: h.record})
	h.t.Cleanup(func() { e.Close() })
	return e
}

// record keeps a notice or detail of the executor, for notices.
func (h *harness) record(m string) {
	h.mu.Lock()
	h.notice = append(h.notice, m)
	h.mu.Unlock()
}

func (h *harness) notices() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.notice, "\n")
}

// wantNotices checks that the notices and details so far contain each of
// lines.
func (h *harness) wantNotices(lines ...string) {
	h.t.Helper()
	for _, line := range lines {
		if !strings.Contains(h.notices(), line) {
			h.t.Errorf("notices lack %q:\n%s", line, h.notices())
		}
	}
}

func (h *harness) spec(n int, args ...string) trial.Spec {
	base := filepath.Join(h.dir, "trial-"+strconv.Itoa(n))
	env := append(slices.Clone(h.base), "BATCHFIT_BATCH_SIZE="+strconv.Itoa(n), "BATCHFIT_TRIAL="+strconv.Itoa(n),
		"CUDA_VISIBLE_DEVICES="+strconv.Itoa(n%2))
	return trial.Spec{
		Argv:       append([]string{h.py}, args...),
		Env:        adapter.Env(env, h.pp, base+".report.jsonl"),
		Dir:        h.cwd,
		Timeout:    time.Minute,
		Grace:      time.Second,
		StdoutPath: base + ".out",
		StderrPath: base + ".err",
	}
}

// ran is what a finished trial left.
type ran struct {
	res    trial.Result
	stdout string
	stderr string
	events []adapter.Event
}

func (h *harness) run(e *Executor, spec trial.Spec) ran {
	h.t.Helper()
	var res trial.Result
	var err error
	if e == nil {
		res, err = trial.Run(context.Background(), spec, nil)
	} else {
		res, err = e.Run(context.Background(), spec, nil)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return h.left(spec, res)
}

// left is what spec's trial, which ended with res, left.
func (h *harness) left(spec trial.Spec, res trial.Result) ran {
	out, _ := os.ReadFile(spec.StdoutPath)
	errb, _ := os.ReadFile(spec.StderrPath)
	report, _ := adapter.Lookup(spec.Env, adapter.ReportEnv)
	events, _, _ := adapter.Read(report)
	return ran{res: res, stdout: string(out), stderr: string(errb), events: events}
}

// running is a trial started in the background (harness.start).
type running struct {
	spec trial.Spec
	done chan struct{}
	res  trial.Result
	err  error
}

// start runs spec with e in the background, for trials side by side or a
// trial that waits.
func (h *harness) start(e *Executor, spec trial.Spec) *running {
	r := &running{spec: spec, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.res, r.err = e.Run(context.Background(), spec, nil)
	}()
	return r
}

// wait is what r left once it ended, within limit.
func (h *harness) wait(r *running, limit time.Duration) ran {
	h.t.Helper()
	select {
	case <-r.done:
	case <-time.After(limit):
		h.t.Fatalf("trial %q still running after %s", r.spec.Argv, limit)
	}
	if r.err != nil {
		h.t.Fatal(r.err)
	}
	return h.left(r.spec, r.res)
}

// awaitPending is the server being started and preloaded, once there is
// one (within 10s), or nil.
func (e *Executor) awaitPending() *server {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		e.mu.Lock()
		srv := e.pending
		e.mu.Unlock()
		if srv != nil {
			return srv
		}
	}
	return nil
}

// freshThenForked runs a trial that teaches the executor its modules (itself
// forked from the server guessed from show.py's imports), then args fresh
// (trial.Run, no executor) and forked, and returns both.
func (h *harness) freshThenForked(e *Executor, args ...string) (fresh, forked ran) {
	h.t.Helper()
	if !e.learnedAlready() {
		first := h.run(e, h.spec(1, "show.py"))
		if !first.res.Forked || first.res.ExitCode != 0 || !e.learnedAlready() {
			h.t.Fatalf("first trial: forked %v, exit %d, taught %v: %s", first.res.Forked, first.res.ExitCode, e.learnedAlready(), first.stderr)
		}
	}
	h.mu.Lock()
	h.n += 2
	n := 10 + h.n
	h.mu.Unlock()
	fresh = h.run(nil, h.spec(n, args...))
	forked = h.run(e, h.spec(n+1, args...))
	if !forked.res.Forked {
		h.t.Fatalf("not forked: %s", h.notices())
	}
	return fresh, forked
}

func (e *Executor) learnedAlready() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.learned
}

// showed is show.py's first line, with what differs between two trials by
// design (the batch size, the GPU) checked and removed.
func showed(t *testing.T, r ran) map[string]any {
	t.Helper()
	line, _, _ := strings.Cut(r.stdout, "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("output %q: %v", r.stdout, err)
	}
	delete(m, "size")
	delete(m, "cuda")
	return m
}

func TestForkedTrialLikeFresh(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	for _, mode := range []string{"", "exit3", "message", "raise", "atexit"} {
		t.Run("mode="+mode, func(t *testing.T) {
			args := []string{"show.py"}
			if mode != "" {
				args = append(args, mode)
			}
			fresh, forked := h.freshThenForked(e, args...)
			if got, want := showed(t, forked), showed(t, fresh); !reflect.DeepEqual(got, want) {
				t.Errorf("forked program saw\n%v\nfresh\n%v", got, want)
			}
			if forked.stdout[strings.Index(forked.stdout, "\n"):] != fresh.stdout[strings.Index(fresh.stdout, "\n"):] {
				t.Errorf("stdout after the first line: forked %q, fresh %q", forked.stdout, fresh.stdout)
			}
			if forked.stderr != fresh.stderr {
				t.Errorf("stderr: forked %q, fresh %q", forked.stderr, fresh.stderr)
			}
			if forked.res.ExitCode != fresh.res.ExitCode || forked.res.Signal != fresh.res.Signal {
				t.Errorf("exit: forked %d/%v, fresh %d/%v", forked.res.ExitCode, forked.res.Signal, fresh.res.ExitCode, fresh.res.Signal)
			}
			compareReports(t, forked, fresh)
		})
	}
	if !strings.Contains(h.notices(), "from a server that imported ") || !strings.Contains(h.notices(), "heavy") {
		t.Errorf("notices: %s", h.notices())
	}
}

// compareReports checks that the adapter reported the same of both.
func compareReports(t *testing.T, forked, fresh ran) {
	t.Helper()
	if len(forked.events) != 1 || len(fresh.events) != 1 {
		t.Fatalf("reports: forked %d events, fresh %d", len(forked.events), len(fresh.events))
	}
	a, b := forked.events[0], fresh.events[0]
	if a.PID != forked.res.PID {
		t.Errorf("forked report from pid %d, trial %d", a.PID, forked.res.PID)
	}
	paths := func(ev adapter.Event) []string {
		var out []string
		for _, s := range ev.Sources {
			out = append(out, s.Path)
		}
		return out
	}
	if !reflect.DeepEqual(paths(a), paths(b)) {
		t.Errorf("sources: forked %v, fresh %v", paths(a), paths(b))
	}
	// A forked process has the server's packages too, whether or not the
	// program imported them.
	for _, p := range b.Packages {
		if !slices.Contains(a.Packages, p) {
			t.Errorf("packages: forked %v, fresh %v", a.Packages, b.Packages)
		}
	}
	a.PID, b.PID, a.Sources, b.Sources, a.Packages, b.Packages = 0, 0, nil, nil, nil, nil
	a.StepTimes, b.StepTimes = nil, nil
	if !reflect.DeepEqual(a, b) {
		t.Errorf("report: forked %+v, fresh %+v", a, b)
	}
}

func TestForkedModuleLikeFresh(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	for _, args := range [][]string{
		{"-m", "userpkg.mod", "a", "b"},
		{"-m", "userpkg", "c"},
		{"-m", "nosuchmodule"},
		{"syntax.py"},
	} {
		fresh, forked := h.freshThenForked(e, args...)
		if forked.stdout != fresh.stdout || forked.stderr != fresh.stderr || forked.res.ExitCode != fresh.res.ExitCode {
			t.Errorf("%q forked:\n%s%s(exit %d)\nfresh:\n%s%s(exit %d)", args, forked.stdout, forked.stderr, forked.res.ExitCode,
				fresh.stdout, fresh.stderr, fresh.res.ExitCode)
		}
		t.Run(strings.Join(args, " "), func(t *testing.T) { compareReports(t, forked, fresh) })
	}
}

// TestForkedSoak: a soaked trial (BATCHFIT_SOAK) stopped by batchfit's
// SIGTERM at the soak's end writes its report and leaves with status 0, as
// a fresh one does.
func TestForkedSoak(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	h.run(e, h.spec(1, "show.py"))
	soak := func(spec trial.Spec) trial.Spec {
		spec.Env = append(spec.Env, "BATCHFIT_SOAK=1", "BATCHFIT_STEPS=1000000")
		spec.Timeout = time.Second
		return spec
	}
	fresh := h.run(nil, soak(h.spec(2, "show.py", "hang")))
	forked := h.run(e, soak(h.spec(3, "show.py", "hang")))
	if !forked.res.Forked || !forked.res.TimedOut || forked.res.ExitCode != fresh.res.ExitCode || forked.res.Signal != fresh.res.Signal {
		t.Errorf("forked %v, timed out %v, exit %d/%v; fresh exit %d/%v", forked.res.Forked, forked.res.TimedOut,
			forked.res.ExitCode, forked.res.Signal, fresh.res.ExitCode, fresh.res.Signal)
	}
	if len(forked.events) != 1 || !forked.events[0].Stopped {
		t.Errorf("forked report %+v", forked.events)
	}
	compareReports(t, forked, fresh)
}

func TestForkedTimeoutKillsTheGroup(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	h.run(e, h.spec(1, "show.py"))
	spec := h.spec(2, "show.py", "hang")
	spec.Timeout = 500 * time.Millisecond
	r := h.run(e, spec)
	if !r.res.Forked || !r.res.TimedOut || r.res.Signal != syscall.SIGTERM {
		t.Errorf("forked %v, timed out %v, signal %v", r.res.Forked, r.res.TimedOut, r.res.Signal)
	}
	if alive(r.res.PID) {
		t.Errorf("leader %d still alive", r.res.PID)
	}
}

func TestForkedCancel(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	h.run(e, h.spec(1, "show.py"))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	res, err := e.Run(ctx, h.spec(2, "show.py", "hang"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Forked || !res.Canceled {
		t.Errorf("forked %v, canceled %v", res.Forked, res.Canceled)
	}
}

func TestForkedOrphansAreKilled(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	h.run(e, h.spec(1, "show.py"))
	spec := h.spec(2, "show.py", "orphan")
	var cgroup string
	spec.OnSpawn = func(p trial.Process) func() { cgroup = p.Cgroup; return nil }
	r := h.run(e, spec)
	if trial.CgroupAvailable() && cgroup == "" {
		t.Error("trial cgroups are available here, but the forked trial ran in none")
	}
	t.Logf("cgroup %q", cgroup)
	if !r.res.Forked || r.res.ExitCode != 0 || r.res.Orphans != 1 {
		t.Errorf("forked %v, exit %d, orphans %d: %s", r.res.Forked, r.res.ExitCode, r.res.Orphans, r.stderr)
	}
	// Nothing of the trial may be left: no process of ours runs the
	// grandchild's command.
	pids, _ := procfs.PIDs()
	for _, pid := range pids {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil &&
			strings.Contains(string(b), "time.sleep(3600)") && alive(pid) {
			if env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); strings.Contains(string(env), h.dir) {
				t.Errorf("grandchild %d survived", pid)
			}
		}
	}
}

// twoSteps is spec stopped after its second training step.
func twoSteps(spec trial.Spec) trial.Spec {
	spec.Env = append(spec.Env, "BATCHFIT_STEPS=2")
	return spec
}

func alive(pid int) bool {
	st, err := procfs.ReadStat(pid)
	return err == nil && !st.Dead()
}

func TestTorchForkedLikeFresh(t *testing.T) {
	h := newHarness(t)
	if !hasTorch(h.py) {
		t.Skip("no torch")
	}
	e := h.executor()
	// The first trial is forked from the server guessed from the script's
	// imports (torch), the third from the one settled by the first's
	// report; both are compared with a plain fresh process.
	first := h.run(e, twoSteps(h.spec(1, "torchtrain.py", "4")))
	fresh := h.run(nil, twoSteps(h.spec(2, "torchtrain.py", "4")))
	forked := h.run(e, twoSteps(h.spec(3, "torchtrain.py", "4")))
	if !first.res.Forked || !forked.res.Forked {
		t.Fatalf("first forked %v, third forked %v: %s", first.res.Forked, forked.res.Forked, h.notices())
	}
	t.Logf("fresh %.2fs, forked first %.2fs, third %.2fs (%s)", fresh.res.Duration.Seconds(), first.res.Duration.Seconds(),
		forked.res.Duration.Seconds(), h.notices())
	for _, f := range []struct {
		name string
		r    ran
	}{{"first", first}, {"third", forked}} {
		t.Run(f.name, func(t *testing.T) {
			if f.r.stdout != fresh.stdout || f.r.res.ExitCode != 0 {
				t.Errorf("forked %q (exit %d), fresh %q", f.r.stdout, f.r.res.ExitCode, fresh.stdout)
			}
			if ev := f.r.events; len(ev) != 1 || !ev[0].Stopped || ev[0].Steps != 2 || !slices.Contains(ev[0].Packages, "torch") {
				t.Errorf("forked report %+v", ev)
			}
			compareReports(t, f.r, fresh)
		})
	}
}

// Each module that fails to import or is unsafe to fork from is named, and
// dropped by one server: marked, imported first, is imported once.
func TestUnsafeModulesAreDropped(t *testing.T) {
	faketorch, _ := filepath.Abs("../adapter/testdata/faketorch")
	h := newHarness(t, faketorch)
	e := h.executor()
	path := filepath.Join(h.dir, "marks")
	spec := h.modulesSpec(1, path)
	k, ok := keyOf(spec)
	if !ok {
		t.Fatal("modules.py not forkable")
	}
	srv, _ := e.start(k, serverEnv(spec.Env), wanted{modules: []string{"marked", "broken", "threaded", "nativethread", "gpuinit", "heavy"}})
	if srv == nil {
		t.Fatalf("no server: %s", h.notices())
	}
	defer srv.close()
	if m := marks(t, path); len(m["marked"]) != 1 || m["marked"][0] != srv.pgid {
		t.Errorf("marked imported by %v, want once, by the server started as %d", m["marked"], srv.pgid)
	}
	h.wantNotices(
		"not preloading broken: import failed",
		"not preloading threaded: 1 Python thread(s) running",
		"not preloading nativethread: 1 native thread(s) running that a fork does not stop",
		"not preloading gpuinit: torch initialised CUDA",
		"heavy",
	)
}

// A server that has forked a trial imports in place, without a backup to
// hand over to (only it can report the trial's exit): a module that
// initialises CUDA poisons it, and it refuses to fork again.
func TestForkAfterCUDAInitIsRefused(t *testing.T) {
	faketorch, _ := filepath.Abs("../adapter/testdata/faketorch")
	h := newHarness(t, faketorch)
	spec := h.spec(1, "show.py")
	k, _ := keyOf(spec)
	srv, err := startServer(k, serverEnv(spec.Env), "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	hang := h.spec(2, "show.py", "hang")
	hang.Launcher = srv
	started, ended := make(chan struct{}), make(chan trial.Result, 1)
	hang.OnSpawn = func(trial.Process) func() { close(started); return nil }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		res, _ := trial.Run(ctx, hang, nil)
		ended <- res
	}()
	<-started
	p, err := srv.preload([]string{"gpuinit"}, false, "", time.Minute)
	if err != nil || !p.poisoned || len(p.dropped) != 1 || !p.dropped[0].Unsafe || srv.serverPID() != srv.pgid {
		t.Fatalf("preload: dropped %v, poisoned %v, server %d (started as %d), %v", p.dropped, p.poisoned, srv.serverPID(), srv.pgid, err)
	}
	spec.Launcher = srv
	_, err = trial.Run(context.Background(), spec, nil)
	if err == nil || !strings.Contains(err.Error(), "refused to fork: gpuinit: torch initialised CUDA") {
		t.Fatalf("run after CUDA init: %v", err)
	}
	cancel()
	if res := <-ended; !res.Canceled {
		t.Errorf("the trial forked before the import: %+v", res)
	}
}

// TestForkedNumpyIsReseeded: numpy seeds its global generator from the OS
// at import; forked from one server, trials must not all draw the same
// numbers.
func TestForkedNumpyIsReseeded(t *testing.T) {
	h := newHarness(t)
	if exec.Command(h.py, "-c", "import numpy").Run() != nil {
		t.Skip("no numpy")
	}
	e := h.executor()
	h.run(e, h.spec(1, "draw.py"))
	a, b := h.run(e, h.spec(2, "draw.py")), h.run(e, h.spec(3, "draw.py"))
	if !a.res.Forked || !b.res.Forked || a.stdout == b.stdout {
		t.Errorf("forked %v %v, drew %q and %q", a.res.Forked, b.res.Forked, a.stdout, b.stdout)
	}
}

func TestNotForkableRunsFresh(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	h.run(e, h.spec(1, "show.py"))
	for _, args := range [][]string{{"-u", "show.py"}, {"-c", "print(1)"}} {
		r := h.run(e, h.spec(2, args...))
		if r.res.Forked || r.res.ExitCode != 0 {
			t.Errorf("%v: forked %v, exit %d", args, r.res.Forked, r.res.ExitCode)
		}
	}
	// Another environment than the server's: fresh.
	spec := h.spec(3, "show.py")
	spec.Env = append(spec.Env, "PYTHONHASHSEED=1")
	if r := h.run(e, spec); r.res.Forked {
		t.Error("forked a trial whose environment differs from the server's")
	}
}

func TestForkable(t *testing.T) {
	dir := "testdata"
	for _, c := range []struct {
		argv []string
		want bool
	}{
		{[]string{"python3", "show.py", "1"}, true},
		{[]string{"/usr/bin/python3.11", "show.py"}, true},
		{[]string{"python", "-m", "userpkg.mod"}, true},
		{[]string{"python3", "-u", "show.py"}, false},
		{[]string{"python3", "-c", "pass"}, false},
		{[]string{"python3", "-m"}, false},
		{[]string{"python3"}, false},
		{[]string{"python3", "missing.py"}, false},
		{[]string{"python3", "userpkg"}, false}, // a directory
		{[]string{"torchrun", "--nproc_per_node=2", "show.py"}, false},
		{[]string{"sh", "show.py"}, false},
		{[]string{"./train.sh"}, false},
		{[]string{"python3-config", "show.py"}, false},
	} {
		if got := Forkable(c.argv, dir); got != c.want {
			t.Errorf("Forkable(%q) = %v, want %v", c.argv, got, c.want)
		}
	}
}

// TestCloseWhilePreloading: a search that ends while the server is still
// importing does not wait for it, and leaves no server behind.
func TestCloseWhilePreloading(t *testing.T) {
	h := newHarness(t)
	e := New(Options{LogDir: h.dir})
	spec := h.spec(1, "show.py")
	k, _ := keyOf(spec)
	done := make(chan *server)
	go func() {
		srv, _ := e.start(k, serverEnv(spec.Env), wanted{modules: []string{"slowimport"}})
		done <- srv
	}()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		e.mu.Lock()
		if e.pending != nil {
			pid = e.pending.pgid
		}
		e.mu.Unlock()
	}
	if pid == 0 {
		t.Fatal("the server never started preloading")
	}
	began := time.Now()
	e.Close()
	select {
	case srv := <-done:
		if srv != nil {
			t.Error("a server came back after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("start still waiting 10s after Close")
	}
	took := time.Since(began)
	if left := groupLeft(pid); took > 5*time.Second || len(left) > 0 {
		t.Errorf("closed in %s, processes of the server left %v", took, left)
	}
}

// TestServerDeathRunsTheTrialFresh: a server that dies under a trial takes
// the trial with it; the trial runs again as a fresh process, and so do
// later ones.
func TestServerDeathRunsTheTrialFresh(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	h.run(e, h.spec(1, "show.py"))
	<-e.ready
	e.mu.Lock()
	srv := e.srv
	e.mu.Unlock()
	if srv == nil {
		t.Fatalf("no server: %s", h.notices())
	}
	spec := h.spec(2, "show.py", "hang")
	var once sync.Once
	spec.OnSpawn = func(p trial.Process) func() {
		// Kill the server under the forked trial; the fresh re-run hangs
		// until its time limit.
		once.Do(func() { time.AfterFunc(300*time.Millisecond, srv.kill) })
		return nil
	}
	spec.Timeout = 2 * time.Second
	r := h.run(e, spec)
	if r.res.Forked || !r.res.TimedOut {
		t.Errorf("forked %v, timed out %v (the fresh re-run should have run to its limit)", r.res.Forked, r.res.TimedOut)
	}
	if !strings.Contains(h.notices(), "the fork server died during a trial") {
		t.Errorf("notices: %s", h.notices())
	}
	if r := h.run(e, h.spec(3, "show.py")); r.res.Forked {
		t.Error("forked from a dead server")
	}
}

// TestGuessedServerDeathRunsTheTrialFresh: the guessed server dying under
// the first trial takes the trial with it, which runs again as a fresh
// process, without a notice (a guess fails without a word): its report
// starts a server of its own, which the trial after is forked from.
func TestGuessedServerDeathRunsTheTrialFresh(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	dir := writeScripts(t, map[string]string{"train.py": "import time\nimport heavy\ntime.sleep(1)\n"})
	spec := h.spec(1, filepath.Join(dir, "train.py"))
	var once sync.Once
	var guessed *server
	spec.OnSpawn = func(p trial.Process) func() {
		once.Do(func() {
			e.mu.Lock()
			guessed = e.srv
			e.mu.Unlock()
			time.AfterFunc(300*time.Millisecond, guessed.kill)
		})
		return nil
	}
	if r := h.run(e, spec); r.res.Forked || r.res.ExitCode != 0 || guessed == nil {
		t.Fatalf("first trial: forked %v, exit %d (the fresh re-run should have ended well): %s", r.res.Forked, r.res.ExitCode, r.stderr)
	}
	r := h.run(e, h.spec(2, filepath.Join(dir, "train.py")))
	e.mu.Lock()
	srv := e.srv
	e.mu.Unlock()
	if !r.res.Forked || srv == nil || srv == guessed {
		t.Errorf("second trial: forked %v, from %v (the dead guessed server %v)", r.res.Forked, srv, guessed)
	}
	if n := h.notices(); strings.Contains(n, "died") || !strings.Contains(n, "heavy") || strings.Contains(n, "the script's imports") {
		t.Errorf("notices:\n%s", n)
	}
}

func TestListed(t *testing.T) {
	if got := listed([]string{"a", "b"}, 2); got != "a, b" {
		t.Errorf("listed = %q", got)
	}
	if got := listed([]string{"a", "b", "c"}, 2); got != "a, b and 1 more" {
		t.Errorf("listed = %q", got)
	}
}

// TestForkedInParallel: trials on several GPU slots fork from one server at
// once; each gets its own exit status.
func TestForkedInParallel(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	h.run(e, h.spec(1, "show.py"))
	var wg sync.WaitGroup
	results := make([]ran, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mode := "exit3"
			if i%2 == 0 {
				mode = "atexit"
			}
			results[i] = h.run(e, h.spec(20+i, "show.py", mode))
		}()
	}
	wg.Wait()
	for i, r := range results {
		want := 3
		if i%2 == 0 {
			want = 0
		}
		if !r.res.Forked || r.res.ExitCode != want || len(r.events) != 1 {
			t.Errorf("trial %d: forked %v, exit %d (want %d), %d events", i, r.res.Forked, r.res.ExitCode, want, len(r.events))
		}
	}
}

// A search's trials change their environment once early (JAX's pool
// fraction, which the first trial's measurement fixes for a whole-process
// memory limit): the first trial is forked from the server guessed for the
// first environment, the trial with the new one runs fresh and the server
// starts anew for it, so that the trials after it are forked again.
func TestServerStartsAnewForANewEnvironment(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	withCap := func(n int, fraction string) trial.Spec {
		spec := h.spec(n, "show.py")
		spec.Env = append(spec.Env, "XLA_PYTHON_CLIENT_MEM_FRACTION="+fraction)
		return spec
	}
	for i, tc := range []struct {
		fraction string
		forked   bool
	}{{"0.5", true}, {"0.4", false}, {"0.4", true}, {"0.4", true}} {
		r := h.run(e, withCap(i+1, tc.fraction))
		if r.res.Forked != tc.forked || r.res.ExitCode != 0 {
			t.Fatalf("trial %d (fraction %s): forked %v, exit %d, want forked %v: %s\n%s", i+1, tc.fraction, r.res.Forked, r.res.ExitCode, tc.forked, r.stderr, h.notices())
		}
		if !strings.Contains(r.stdout, `"xla_fraction": "`+tc.fraction+`"`) {
			t.Errorf("trial %d saw another environment than its own: %s", i+1, r.stdout)
		}
	}
	e.mu.Lock()
	rekeys := e.rekeys
	e.mu.Unlock()
	if rekeys != 1 {
		t.Errorf("started anew %d times, want once", rekeys)
	}
}

// Torch's allocator cap is a trial's own variable (torch reads it when CUDA
// starts): a new cap is forked from the same server (the guessed one, that
// the first trial is forked from too), and each trial sees its own.
func TestAllocatorCapIsPerTrial(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	for i, fraction := range []string{"0.5", "0.4", "0.4"} {
		spec := h.spec(i+1, "show.py")
		spec.Env = append(spec.Env, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,per_process_memory_fraction:"+fraction)
		r := h.run(e, spec)
		if !r.res.Forked || r.res.ExitCode != 0 {
			t.Fatalf("trial %d (fraction %s): forked %v, exit %d: %s\n%s", i+1, fraction, r.res.Forked, r.res.ExitCode, r.stderr, h.notices())
		}
		if !strings.Contains(r.stdout, "per_process_memory_fraction:"+fraction) {
			t.Errorf("trial %d saw another environment than its own: %s", i+1, r.stdout)
		}
	}
	e.mu.Lock()
	rekeys := e.rekeys
	e.mu.Unlock()
	if rekeys != 0 {
		t.Errorf("a server was started anew %d times for a new cap", rekeys)
	}
}

// The server keeps the allocator options torch reads at import (its
// backend) and leaves out the cap, which each trial sets for itself.
func TestServerEnvKeepsAllocatorOptionsButTheCap(t *testing.T) {
	got := serverEnv([]string{"A=1", "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,per_process_memory_fraction:0.2", "BATCHFIT_TRIAL=3"})
	if want := []string{"A=1", "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"}; !slices.Equal(got, want) {
		t.Errorf("serverEnv = %q, want %q", got, want)
	}
	if got := serverEnv([]string{"PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:0.2"}); len(got) != 0 {
		t.Errorf("serverEnv of a cap alone = %q, want nothing", got)
	}
}

// primeSpec is testdata/prime/train.py's trial n, its packages writing who
// imported them to marks.
func (h *harness) primeSpec(n int, marks string, args ...string) trial.Spec {
	spec := h.spec(n, append([]string{"prime/train.py"}, args...)...)
	spec.Env = append(spec.Env, "PRIME_MARKS="+marks)
	return spec
}

// primeRun is what testdata/prime/train.py printed.
type primeRun struct {
	PID      int    `json:"pid"`
	Marked   int    `json:"marked"`
	Mine     int    `json:"mine"`
	Shadow   string `json:"shadow"`
	Indirect int    `json:"indirect"`
}

func (h *harness) primeRun(e *Executor, spec trial.Spec) (primeRun, trial.Result) {
	h.t.Helper()
	r := h.run(e, spec)
	var p primeRun
	if r.res.ExitCode != 0 || json.Unmarshal([]byte(r.stdout), &p) != nil {
		h.t.Fatalf("exit %d: %s%s\n%s", r.res.ExitCode, r.stdout, r.stderr, h.notices())
	}
	return p, r.res
}

// marks are the pids that imported each package (testdata/prime).
func marks(t *testing.T, path string) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, pid, _ := strings.Cut(line, " ")
		n, _ := strconv.Atoi(pid)
		out[name] = append(out[name], n)
	}
	return out
}

// The server starts as the first trial starts, from the script's imports,
// and imports only the third-party ones: the first trial waits for it and
// is forked from it, and so are the trials after, even without waiting for
// a server (Options.Wait); the program's own modules (one named like a
// third-party package among them) are never imported by the server, and a
// guessed package that fails to import is not worth a notice.
func TestTrialsForkedFromTheGuess(t *testing.T) {
	h := newHarness(t)
	e := New(Options{LogDir: h.dir, Notice: h.record, Detail: h.record})
	t.Cleanup(func() { e.Close() })
	path := filepath.Join(h.dir, "marks")
	server := 0
	for n := 1; n <= 3; n++ {
		p, res := h.primeRun(e, h.primeSpec(n, path))
		if n == 1 {
			server = p.Marked
		}
		if !res.Forked || p.Marked == p.PID || p.Marked != server || p.Mine != p.PID || p.Shadow != "user" {
			t.Errorf("trial %d: forked %v, %+v (server %d): %s", n, res.Forked, p, server, h.notices())
		}
	}
	e.mu.Lock()
	dropped := slices.Clone(e.dropped)
	e.mu.Unlock()
	if !reflect.DeepEqual(dropped, []string{"broken"}) {
		t.Errorf("dropped %q, want the guess's broken", dropped)
	}
	m := marks(t, path)
	if len(m["shadow-site"]) > 0 || len(m["mine"]) != 3 || slices.Contains(m["mine"], server) || !reflect.DeepEqual(m["marked"], []int{server}) {
		t.Errorf("imports: %v (server %d)", m, server)
	}
	if n := strings.Count(h.notices(), "\n"); n != 0 ||
		!strings.Contains(h.notices(), "forking trials from a server that imported marked (the script's imports)") {
		t.Errorf("notices:\n%s", h.notices())
	}
}

// A warm worker's search primes the server before any fresh trial and
// teaches it the packages the worker imported: the first fresh trial is
// forked too.
func TestTaughtServerForksTheFirstTrial(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	path := filepath.Join(h.dir, "marks")
	spec := h.primeSpec(1, path, "indirect")
	e.Prime(spec)
	e.Teach(spec, []string{"marked", "indirect"})
	p, res := h.primeRun(e, spec)
	if !res.Forked || p.Marked == p.PID || p.Indirect == p.PID {
		t.Errorf("first trial: forked %v, %+v: %s", res.Forked, p, h.notices())
	}
	if m := marks(t, path); len(m["marked"]) != 1 || len(m["indirect"]) != 1 {
		t.Errorf("imports: %v, want each once, in the server", m)
	}
}

// A third-party package that the script imports only through a module of
// its own is missed by the guess: the first trial, forked from the guessed
// server, imports it itself and its report names it; the guessed server
// imports it too, and the trials after are forked from it.
func TestGuessMissingAPackageIsImported(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	path := filepath.Join(h.dir, "marks")
	first, res := h.primeRun(e, h.primeSpec(1, path, "indirect"))
	if !res.Forked || first.Marked == first.PID || first.Indirect != first.PID {
		t.Fatalf("first trial: forked %v, %+v", res.Forked, first)
	}
	guessed := first.Marked
	for n := 2; n <= 3; n++ {
		p, res := h.primeRun(e, h.primeSpec(n, path, "indirect"))
		// The guess's broken failed to import: a backup of the guessed
		// server took over from the process that tried, and imported indirect.
		e.mu.Lock()
		srv := e.srv
		e.mu.Unlock()
		if !res.Forked || guessed == 0 || srv == nil || srv.pgid != guessed || p.Marked != guessed || p.Indirect != srv.serverPID() {
			t.Errorf("trial %d: forked %v, %+v (guessed server %d): %s", n, res.Forked, p, guessed, h.notices())
		}
	}
	if m := marks(t, path); len(m["marked"]) != 1 || len(m["indirect"]) != 2 {
		t.Errorf("imports: %v, want marked by the guessed server, indirect by it and the first trial (a server started anew?)", m)
	}
	if h.notices() != "preload: forking trials from a server that imported marked, indirect" {
		t.Errorf("notices:\n%s", h.notices())
	}
}

// The trial after the first waits for the guessed server to import what
// the first report added, rather than run fresh beside it, even when
// searches do not wait (Options.Wait): importing a few packages into the
// server is sooner done than a fresh start that imports everything.
func TestTrialWaitsForWhatTheGuessMissed(t *testing.T) {
	h := newHarness(t)
	e := New(Options{LogDir: h.dir, Notice: h.record, Detail: h.record})
	t.Cleanup(func() { e.Close() })
	path := filepath.Join(h.dir, "marks")
	if _, res := h.primeRun(e, h.primeSpec(1, path, "indirect")); !res.Forked {
		t.Fatalf("first trial not forked: %s", h.notices())
	}
	p, res := h.primeRun(e, h.primeSpec(2, path, "indirect"))
	if !res.Forked || p.Indirect == p.PID {
		t.Errorf("second trial: forked %v, %+v, want forked from a server that imported indirect: %s", res.Forked, p, h.notices())
	}
}

// A guess (third_party_only) imports only third-party packages: not the
// standard library, not the program's own modules beside the script (home),
// not a third-party package that one of them shadows, not what is missing.
func TestGuessImportsOnlyThirdParty(t *testing.T) {
	h := newHarness(t)
	spec := h.spec(1, "prime/train.py")
	path := filepath.Join(h.dir, "marks")
	spec.Env = append(spec.Env, "PRIME_MARKS="+path)
	k, _ := keyOf(spec)
	srv, err := startServer(k, serverEnv(spec.Env), "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	home, _ := filepath.Abs(filepath.Join("testdata", "prime"))
	p, err := srv.preload([]string{"json", "os", "marked", "mine", "shadow", "helper", "nosuchmodule", "userpkg", "batchfit", "sys"}, true, home, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.loaded, []string{"marked"}) || len(p.dropped) != 0 || p.poisoned ||
		!slices.Contains(p.packages, "marked") || slices.Contains(p.packages, "shadow") {
		t.Errorf("preloaded %+v", p)
	}
	if b, _ := os.ReadFile(path); string(b) != "marked "+strconv.Itoa(srv.pgid)+"\n" {
		t.Errorf("imported: %q", b)
	}
}

// A guessed package that is unsafe to fork from is named once, and the
// server without it is kept: the report that names it again (the first
// trial, forked from that server, imported it itself) starts no other. The
// server that imported it handed over to a backup, which imported marked:
// marked is imported by one server, and by no trial.
func TestGuessUnsafeNamedOnce(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	dir := writeScripts(t, map[string]string{"unsafe.py": "import threaded\nimport marked\n"})
	path := filepath.Join(dir, "marks")
	for n := 1; n <= 3; n++ {
		spec := h.spec(n, filepath.Join(dir, "unsafe.py"))
		spec.Env = append(spec.Env, "PRIME_MARKS="+path)
		r := h.run(e, spec)
		if !r.res.Forked || r.res.ExitCode != 0 {
			t.Fatalf("trial %d: forked %v, exit %d: %s\n%s", n, r.res.Forked, r.res.ExitCode, r.stderr, h.notices())
		}
	}
	if m := marks(t, path); len(m["marked"]) != 1 {
		t.Errorf("imports: %v, want marked by one server only", m)
	}
	want := "preload: not preloading threaded: 1 Python thread(s) running\n" +
		"preload: forking trials from a server that imported marked (the script's imports)"
	if h.notices() != want {
		t.Errorf("notices:\n%s\nwant\n%s", h.notices(), want)
	}
}

// A report may come while the guessed server still imports (a warm
// worker's, Teach, as the first trial waits for the guess): the server is
// settled against it once it has imported, and imports then what the guess
// missed; the trial that waited, and those after it, are forked from it.
func TestGuessSettledOnceImported(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	dir := writeScripts(t, map[string]string{"train.py": "import gate\nimport helper\n", "helper.py": "import indirect\n"})
	marksPath, gate := filepath.Join(dir, "marks"), filepath.Join(dir, "open")
	spec := func(n int) trial.Spec {
		spec := h.spec(n, filepath.Join(dir, "train.py"))
		spec.Env = append(spec.Env, "PRIME_MARKS="+marksPath, "PRIME_GATE="+gate)
		return spec
	}
	first := h.start(e, spec(1))
	if e.awaitPending() == nil {
		t.Fatal("no server importing the guess")
	}
	e.Teach(spec(1), []string{"gate", "indirect"})
	e.mu.Lock()
	learned, guessing := e.learned, e.guessing
	e.mu.Unlock()
	if !learned || !guessing {
		t.Fatalf("learned %v, guessing %v: the guess should still be importing gate", learned, guessing)
	}
	select {
	case <-first.done:
		t.Fatalf("the first trial did not wait for the guess: %+v, %v", first.res, first.err)
	default:
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := h.wait(first, time.Minute); !r.res.Forked || r.res.ExitCode != 0 {
		t.Fatalf("first trial: forked %v, exit %d: %s\n%s", r.res.Forked, r.res.ExitCode, r.stderr, h.notices())
	}
	for n := 2; n <= 3; n++ {
		if r := h.run(e, spec(n)); !r.res.Forked || r.res.ExitCode != 0 {
			t.Fatalf("trial %d: forked %v, exit %d: %s\n%s", n, r.res.Forked, r.res.ExitCode, r.stderr, h.notices())
		}
	}
	m := marks(t, marksPath)
	if len(m["gate"]) != 1 || len(m["indirect"]) != 1 || m["gate"][0] != m["indirect"][0] {
		t.Errorf("imports: %v (the guessed server should have imported indirect too, and no trial either)", m)
	}
	if h.notices() != "preload: forking trials from a server that imported gate, indirect" {
		t.Errorf("notices:\n%s", h.notices())
	}
}

// writeScripts writes files (name: source) into a new directory.
func writeScripts(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A package the guess missed that is unsafe to fork from would spoil the
// guessed server: a backup of it takes over without the package, and no
// server is started anew (marked is imported by the guessed server only,
// which every trial, the first too, is forked from).
func TestGuessMissedUnsafeHandedOver(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	dir := writeScripts(t, map[string]string{"train.py": "import marked\nimport helper\n", "helper.py": "import threaded\n"})
	path := filepath.Join(dir, "marks")
	for n := 1; n <= 3; n++ {
		spec := h.spec(n, filepath.Join(dir, "train.py"))
		spec.Env = append(spec.Env, "PRIME_MARKS="+path)
		if r := h.run(e, spec); !r.res.Forked || r.res.ExitCode != 0 {
			t.Fatalf("trial %d: forked %v, exit %d: %s\n%s", n, r.res.Forked, r.res.ExitCode, r.stderr, h.notices())
		}
	}
	if m := marks(t, path); len(m["marked"]) != 1 {
		t.Errorf("imports: %v, want marked by the guessed server only", m)
	}
	lines := strings.Split(h.notices(), "\n")
	if len(lines) != 2 || lines[0] != "preload: not preloading threaded: 1 Python thread(s) running" ||
		lines[1] != "preload: forking trials from a server that imported marked" {
		t.Errorf("notices:\n%s", h.notices())
	}
}

// A search that ends while the guessed server imports leaves no server, and
// a first trial waiting for that server is not held up: it runs fresh.
func TestCloseWhileGuessing(t *testing.T) {
	h := newHarness(t)
	e := New(Options{LogDir: h.dir})
	dir := writeScripts(t, map[string]string{"train.py": "import gate\n"})
	spec := h.spec(1, filepath.Join(dir, "train.py"))
	spec.Env = append(spec.Env, "PRIME_GATE="+filepath.Join(dir, "never"))
	first := h.start(e, spec)
	srv := e.awaitPending()
	if srv == nil {
		t.Fatal("no server importing the guess")
	}
	e.Close()
	select {
	case <-srv.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the guessed server still runs 10s after Close")
	}
	// The gate holds only the server's import (the trial has a report).
	if r := h.wait(first, 10*time.Second); r.res.Forked || r.res.ExitCode != 0 {
		t.Errorf("the waiting trial: forked %v, exit %d: %s", r.res.Forked, r.res.ExitCode, r.stderr)
	}
	e.mu.Lock()
	ready := e.ready
	e.mu.Unlock()
	<-ready
	e.mu.Lock()
	kept := e.srv != nil
	e.mu.Unlock()
	if left := groupLeft(srv.pgid); kept || len(left) > 0 {
		t.Errorf("server kept %v, its processes left %v", kept, left)
	}
}

// The first trial of a script with third-party imports is forked from the
// server guessed from them, and its report is learned: the server is
// settled (the report adds nothing), and the second trial is forked from
// it, no other server started.
func TestFirstTrialForkedFromTheGuess(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	path := filepath.Join(h.dir, "marks")
	first, res := h.primeRun(e, h.primeSpec(1, path))
	if !res.Forked || first.Marked == first.PID {
		t.Fatalf("first trial: forked %v, %+v", res.Forked, first)
	}
	e.mu.Lock()
	learned, guessing, modules, srv := e.learned, e.guessing, slices.Clone(e.modules), e.srv
	e.mu.Unlock()
	if !learned || guessing || srv == nil || srv.pgid != first.Marked || !slices.Contains(modules, "marked") {
		t.Fatalf("after the first trial: learned %v, guessing %v, modules %q, server %v (the first trial's %d)",
			learned, guessing, modules, srv, first.Marked)
	}
	second, res := h.primeRun(e, h.primeSpec(2, path))
	e.mu.Lock()
	same := e.srv == srv
	e.mu.Unlock()
	if !res.Forked || second.Marked != first.Marked || !same {
		t.Errorf("second trial: forked %v, %+v, from the first's server %v", res.Forked, second, same)
	}
	if m := marks(t, path); !reflect.DeepEqual(m["marked"], []int{srv.pgid}) {
		t.Errorf("imports: %v, want marked by one server only", m)
	}
}

// A script whose own file imports no third-party package gives no server
// to fork the first trial from, whether the guess finds nothing to import
// (only the standard library and the program's own modules) or has no name
// to guess from: that trial runs fresh and teaches what the program's own
// module imported, and the second trial is forked from a server that
// preloaded it.
func TestFirstTrialFreshWithoutAGuess(t *testing.T) {
	for name, src := range map[string]string{
		"stdlib":  "import json, os\nimport helper\n",
		"nothing": "helper = __import__('helper')\n",
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			e := h.executor()
			dir := writeScripts(t, map[string]string{"train.py": src, "helper.py": "import indirect\n"})
			path := filepath.Join(dir, "marks")
			var pids []int
			for n := 1; n <= 2; n++ {
				spec := h.spec(n, filepath.Join(dir, "train.py"))
				spec.Env = append(spec.Env, "PRIME_MARKS="+path)
				r := h.run(e, spec)
				if r.res.Forked != (n == 2) || r.res.ExitCode != 0 {
					t.Fatalf("trial %d: forked %v, exit %d: %s\n%s", n, r.res.Forked, r.res.ExitCode, r.stderr, h.notices())
				}
				pids = append(pids, r.res.PID)
			}
			e.mu.Lock()
			srv := e.srv
			e.mu.Unlock()
			if m := marks(t, path); srv == nil || !reflect.DeepEqual(m["indirect"], []int{pids[0], srv.pgid}) {
				t.Errorf("indirect imported by %v, want the first trial %d and the server", m["indirect"], pids[0])
			}
			// The report names what site's .pth files imported too.
			if n := h.notices(); strings.Count(n, "\n") != 0 || !strings.HasPrefix(n, "preload: forking trials from a server that imported ") ||
				!strings.Contains(n, "indirect") || strings.Contains(n, "the script's imports") {
				t.Errorf("notices:\n%s", n)
			}
		})
	}
}

// A trial canceled while it waits for the guessed server (a package that
// takes a minute to import) ends at once, canceled before it started, as
// trial.Run reports such a trial; it teaches nothing, and Close leaves no
// process of the server behind.
func TestCancelWhileWaitingForTheGuess(t *testing.T) {
	h := newHarness(t)
	e := New(Options{LogDir: h.dir, Notice: h.record, Detail: h.record})
	dir := writeScripts(t, map[string]string{"train.py": "import slowimport\n"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var srv *server
	go func() {
		srv = e.awaitPending()
		cancel()
	}()
	began := time.Now()
	res, err := e.Run(ctx, h.spec(1, filepath.Join(dir, "train.py")), nil)
	took := time.Since(began)
	if err != nil || !res.Canceled || res.PID != 0 || res.Forked || took > 10*time.Second {
		t.Fatalf("after %s: %+v, %v; want canceled before it started", took, res, err)
	}
	if srv == nil {
		t.Fatal("no server importing the guess")
	}
	if e.learnedAlready() {
		t.Error("a trial that never started taught the executor")
	}
	e.Close()
	select {
	case <-srv.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the guessed server still runs 10s after Close")
	}
	if left := groupLeft(srv.pgid); len(left) > 0 || h.notices() != "" {
		t.Errorf("processes of the server left %v; notices %q", left, h.notices())
	}
}

// A first trial waits for the guessed server no longer than its own time
// limit: past it, it runs fresh (its own imports would meet that limit
// anyway), and its report is settled against the guess once that is in.
func TestGuessWaitedForUpToTheTrialsLimit(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	dir := writeScripts(t, map[string]string{"train.py": "import gate\n"})
	spec := h.spec(1, filepath.Join(dir, "train.py"))
	spec.Env = append(spec.Env, "PRIME_GATE="+filepath.Join(dir, "never"))
	spec.Timeout = 2 * time.Second
	began := time.Now()
	r := h.run(e, spec)
	took := time.Since(began)
	if r.res.Forked || r.res.TimedOut || r.res.ExitCode != 0 || took < spec.Timeout || took > spec.Timeout+10*time.Second {
		t.Fatalf("after %s: forked %v, timed out %v, exit %d: %s", took, r.res.Forked, r.res.TimedOut, r.res.ExitCode, r.stderr)
	}
	e.mu.Lock()
	learned, guessing := e.learned, e.guessing
	e.mu.Unlock()
	if !learned || !guessing {
		t.Errorf("learned %v, guessing %v: the guess should still be importing gate", learned, guessing)
	}
}

// Trials side by side before any report (GPU slots) all wait for the
// guessed server and are forked from it; the first to end teaches, and
// the package its report adds is imported into that server only once the
// other has ended (a backup could not take over otherwise): the server is
// the same for all, learned once, with every package.
func TestFirstRoundForkedTogether(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	dir := writeScripts(t, map[string]string{
		"train.py": `import json, os, sys, time
import gate
import marked
import helper

time.sleep(float(sys.argv[1]))
with open(os.environ["PRIME_MARKS"], "a") as f:
    f.write(f"done {os.getpid()}\n")
print(json.dumps({"pid": os.getpid(), "marked": marked.IMPORTED_BY}))
`,
		"helper.py": "import indirect\n",
	})
	path, gate := filepath.Join(dir, "marks"), filepath.Join(dir, "open")
	spec := func(n int, sleep string) trial.Spec {
		spec := h.spec(n, filepath.Join(dir, "train.py"), sleep)
		spec.Env = append(spec.Env, "PRIME_MARKS="+path, "PRIME_GATE="+gate)
		return spec
	}
	short, long := h.start(e, spec(1, "0")), h.start(e, spec(2, "2"))
	srv := e.awaitPending()
	if srv == nil {
		t.Fatal("no server importing the guess")
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	type printed struct{ PID, Marked int }
	var got []printed
	for i, r := range []ran{h.wait(short, time.Minute), h.wait(long, time.Minute), h.run(e, spec(3, "0"))} {
		var p printed
		if !r.res.Forked || r.res.ExitCode != 0 || json.Unmarshal([]byte(r.stdout), &p) != nil || p.Marked != srv.pgid {
			t.Fatalf("trial %d: forked %v, exit %d, %s%s (server %d)\n%s", i+1, r.res.Forked, r.res.ExitCode, r.stdout, r.stderr, srv.pgid, h.notices())
		}
		got = append(got, p)
	}
	e.mu.Lock()
	modules, now, rekeys := slices.Clone(e.modules), e.srv, e.rekeys
	e.mu.Unlock()
	if now != srv || rekeys != 0 || !slices.Contains(modules, "gate") || !slices.Contains(modules, "marked") || !slices.Contains(modules, "indirect") {
		t.Errorf("server %v (was %v), started anew %d times, modules %q", now, srv, rekeys, modules)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The server imported indirect after the long trial ended; the third
	// trial, forked afterwards, did not import it.
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	longDone := slices.Index(lines, "done "+strconv.Itoa(got[1].PID))
	served := slices.Index(lines, "indirect "+strconv.Itoa(srv.serverPID()))
	if m := marks(t, path); longDone < 0 || served < longDone || len(m["indirect"]) != 3 || len(m["marked"]) != 1 || len(m["gate"]) != 1 {
		t.Errorf("imports, in order:\n%s\n(server %d, now %d)", b, srv.pgid, srv.serverPID())
	}
	if h.notices() != "preload: forking trials from a server that imported gate, marked, indirect" {
		t.Errorf("notices:\n%s", h.notices())
	}
}

func TestScriptImports(t *testing.T) {
	dir := t.TempDir()
	src := `"""Docstring.
import notthis
"""
import os, sys as system
import a.b.c as d ; from e.f import (g,
    h)
from . import rel
from .x import y
x = "import strings"  # import comments
y = '''
from notthis import z
'''
def f():
    import lazy
    s = 'it\'s' ; import afterstring
import \
    continued
from k import *
try:
    import optional
except ImportError:
    pass
if x: import notseen
importlib = 1
fromage = 2
import os
`
	if err := os.WriteFile(filepath.Join(dir, "s.py"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"os", "sys", "a", "e", "lazy", "afterstring", "continued", "k", "optional"}
	if got := scriptImports([]string{"python3", "s.py"}, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("scriptImports = %q, want %q", got, want)
	}
	if err := os.MkdirAll(filepath.Join(dir, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pkg", "__main__.py"), []byte("import torch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		argv []string
		want []string
	}{
		{[]string{"python3", "-m", "s"}, want},
		{[]string{"python3", "-m", "pkg"}, []string{"torch"}},
		{[]string{"python3", "-m", "installed.module"}, nil},
		// batchfit's warm worker: the trial it runs is the program.
		{[]string{"python3", "-m", "batchfit.worker", "s.py:Trial"}, want},
		{[]string{"python3", "-m", "batchfit.worker", "s:Trial"}, want},
		{[]string{"python3", "-m", "batchfit.worker", "pkg:Trial"}, nil}, // pkg has no __init__.py
	} {
		if got := scriptImports(c.argv, dir); !reflect.DeepEqual(got, c.want) {
			t.Errorf("scriptImports(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}

// held is what testdata/modules.py printed.
type held struct {
	PID           int             `json:"pid"`
	Modules       map[string]bool `json:"modules"`
	ImportedBy    map[string]int  `json:"imported_by"`
	Threads       int             `json:"threads"`
	PythonThreads int             `json:"python_threads"`
}

// modulesSpec is trial n of testdata/modules.py showing names, its packages
// writing who imported them to marks.
func (h *harness) modulesSpec(n int, marks string, names ...string) trial.Spec {
	spec := h.spec(n, append([]string{"modules.py"}, names...)...)
	spec.Env = append(spec.Env, "PRIME_MARKS="+marks)
	return spec
}

// taught runs trial 1 of modules.py showing names, forked from a server
// taught to preload modules (as a warm worker's hello would teach it), and
// returns what the trial held and the server it was forked from.
func (h *harness) taught(e *Executor, marks string, modules []string, names ...string) (held, *server) {
	h.t.Helper()
	spec := h.modulesSpec(1, marks, names...)
	e.Teach(spec, modules)
	r := h.run(e, spec)
	var got held
	if !r.res.Forked || r.res.ExitCode != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
		h.t.Fatalf("trial: forked %v, exit %d: %s%s\n%s", r.res.Forked, r.res.ExitCode, r.stdout, r.stderr, h.notices())
	}
	e.mu.Lock()
	srv := e.srv
	e.mu.Unlock()
	if srv == nil {
		h.t.Fatalf("no server: %s", h.notices())
	}
	return got, srv
}

// serverPID is the server process now: the one batchfit started, or a
// backup that took over from it.
func (s *server) serverPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// groupLeft lists the processes of group pgid that have not exited, once
// they had 5s to: the reply channel ends as the last of them closes it,
// a moment before it is a zombie.
func groupLeft(pgid int) []int {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var left []int
		pids, _ := procfs.PIDs()
		for _, pid := range pids {
			if st, err := procfs.ReadStat(pid); err == nil && st.PGRP == pgid && !st.Dead() {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}

// Modules that start a thread on import (a Python one, a native one) are
// dropped without a server started anew: the server that imported each hands
// over to a backup of itself from before the import. One server imports
// every other module once, and a trial forked from it holds neither the
// dropped modules nor their threads.
func TestUnsafeModuleHandedOver(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	path := filepath.Join(h.dir, "marks")
	modules := []string{"marked", "threaded", "nativethread", "indirect"}
	got, srv := h.taught(e, path, modules, modules...)
	want := map[string]bool{"marked": true, "threaded": false, "nativethread": false, "indirect": true}
	if !reflect.DeepEqual(got.Modules, want) || got.Threads != 1 || got.PythonThreads != 1 {
		t.Errorf("forked trial held %v, %d threads (%d Python), want %v and 1", got.Modules, got.Threads, got.PythonThreads, want)
	}
	// A server started anew would import marked again.
	if m := marks(t, path); len(m["marked"]) != 1 || len(m["indirect"]) != 1 {
		t.Errorf("imports: %v, want each once", m)
	}
	pid := srv.serverPID()
	if got.ImportedBy["marked"] != srv.pgid || got.ImportedBy["indirect"] != pid || pid == srv.pgid {
		t.Errorf("marked imported by %d, indirect by %d; the server started as %d and is %d now",
			got.ImportedBy["marked"], got.ImportedBy["indirect"], srv.pgid, pid)
	}
	// In the server's group, and re-parented to batchfit (a subreaper from
	// before the server started), which it dies with.
	if st, err := procfs.ReadStat(pid); err != nil || st.PGRP != srv.pgid || st.PPID != os.Getpid() {
		t.Errorf("the server that took over, %d: %+v, %v; want it in group %d, a child of %d", pid, st, err, srv.pgid, os.Getpid())
	}
	h.wantNotices(
		"preload: not preloading threaded: 1 Python thread(s) running",
		"preload: not preloading nativethread: 1 native thread(s) running that a fork does not stop",
		"preload: forking trials from a server that imported marked, indirect",
	)
}

// A server started through a wrapper that runs the interpreter as its
// child (a shell script without exec) hands over all the same: the backup,
// re-parented to batchfit, knows it by the pid batchfit gave the server,
// not as the server's parent (the wrapper).
func TestHandedOverThroughWrapper(t *testing.T) {
	wrapper := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\n"+python(t)+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BATCHFIT_TEST_PYTHON", wrapper)
	h := newHarness(t)
	e := h.executor()
	path := filepath.Join(h.dir, "marks")
	modules := []string{"marked", "threaded"}
	got, srv := h.taught(e, path, modules, modules...)
	if want := map[string]bool{"marked": true, "threaded": false}; !reflect.DeepEqual(got.Modules, want) {
		t.Errorf("forked trial held %v, want %v: %s", got.Modules, want, h.notices())
	}
	pid := srv.serverPID()
	if st, err := procfs.ReadStat(pid); err != nil || st.PPID != os.Getpid() {
		t.Errorf("the server that took over, %d: %+v, %v; want a child of %d", pid, st, err, os.Getpid())
	}
	if r := h.run(e, h.modulesSpec(2, path, modules...)); !r.res.Forked || r.res.ExitCode != 0 {
		t.Errorf("second trial: forked %v, exit %d: %s\n%s", r.res.Forked, r.res.ExitCode, r.stderr, h.notices())
	}
}

// A server that took over from a spoiled one dies with batchfit, as the
// server batchfit started does (its parent-death signal), even in the
// middle of an import, when it does not read its request channel: the test
// runs itself again as "batchfit", whose server hands over (threaded) and
// imports slowimport (a minute), and SIGKILLs it meanwhile.
func TestHandedOverServerDiesWithBatchfit(t *testing.T) {
	if os.Getenv("FORKSERVER_TEST_BATCHFIT") == "1" {
		h := newHarness(t)
		e := h.executor()
		e.Teach(h.modulesSpec(1, filepath.Join(h.dir, "marks")), []string{"threaded", "slowimport"})
		time.Sleep(time.Hour)
		return
	}
	python(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHandedOverServerDiesWithBatchfit$")
	cmd.Env = append(os.Environ(), "FORKSERVER_TEST_BATCHFIT=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The one that took over is a server that does not lead its group,
	// re-parented to "batchfit"; it then imports slowimport.
	backup := 0
	for i := 0; backup == 0; i++ {
		if i == 200 {
			t.Fatal("no server took over in 10 s")
		}
		time.Sleep(50 * time.Millisecond)
		pids, _ := procfs.PIDs()
		for _, pid := range pids {
			st, err := procfs.ReadStat(pid)
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if err == nil && st.PPID == cmd.Process.Pid && st.PGRP != pid && strings.Contains(string(b), "batchfit.forkserver") {
				backup = pid
			}
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for range 50 {
		if !alive(backup) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(backup, syscall.SIGKILL)
	t.Errorf("the server that took over, %d, outlived batchfit by 5 s", backup)
}

// A package whose import forks a child that lives on (without exec) holds
// copies of the backup's pipe: the server tells its backup what to do in a
// line, not by the pipe's end, and so does not wait for that child, whether
// the import went well (forkingchild) or spoiled the server (forkingthread).
func TestImportThatForksDoesNotStall(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	path := filepath.Join(h.dir, "marks")
	start := time.Now()
	modules := []string{"forkingchild", "forkingthread", "marked"}
	got, _ := h.taught(e, path, modules, modules...)
	want := map[string]bool{"forkingchild": true, "forkingthread": false, "marked": true}
	if !reflect.DeepEqual(got.Modules, want) {
		t.Errorf("forked trial held %v, want %v: %s", got.Modules, want, h.notices())
	}
	// The forked children sleep 30 s: a server waiting for them would
	// answer after that.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("preloading and one trial took %s: the server waited for a child of an import", d)
	}
}

// A package whose import fails halfway (a submodule imported, then an
// exception) is dropped with the process that imported it: a trial forked
// afterwards holds no half of it.
func TestFailedImportLeavesNothingBehind(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	path := filepath.Join(h.dir, "marks")
	got, srv := h.taught(e, path, []string{"halfbroken", "marked"}, "halfbroken", "halfbroken.part", "marked")
	want := map[string]bool{"halfbroken": false, "halfbroken.part": false, "marked": true}
	if !reflect.DeepEqual(got.Modules, want) {
		t.Errorf("forked trial held %v, want %v", got.Modules, want)
	}
	if m := marks(t, path); len(m["halfbroken.part"]) != 1 || m["halfbroken.part"][0] != srv.pgid || len(m["marked"]) != 1 {
		t.Errorf("imports: %v (the server started as %d)", m, srv.pgid)
	}
	if !strings.Contains(h.notices(), "preload: not preloading halfbroken: import failed: ImportError: halfbroken fails after importing part") {
		t.Errorf("notices:\n%s", h.notices())
	}
}

// After a handover the server is a process batchfit did not start: a forked
// trial's time limit still kills it, and Close still leaves no process of
// the server behind.
func TestHandedOverServerCloses(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	path := filepath.Join(h.dir, "marks")
	// A trial makes the test a child subreaper, as batchfit is once a
	// trial has run: the server that takes over is then re-parented to us.
	h.run(nil, h.spec(9, "modules.py"))
	_, srv := h.taught(e, path, []string{"threaded", "marked"}, "marked")
	pid := srv.serverPID()
	if st, err := procfs.ReadStat(pid); pid == srv.pgid || err != nil || st.Dead() || st.PPID != os.Getpid() {
		t.Fatalf("server %d (started as %d): %+v, %v; want a handover, to a process re-parented to us", pid, srv.pgid, st, err)
	}
	spec := h.modulesSpec(2, path, "marked", "hang")
	spec.Timeout = 500 * time.Millisecond
	r := h.run(e, spec)
	if !r.res.Forked || !r.res.TimedOut || r.res.Signal != syscall.SIGTERM || alive(r.res.PID) {
		t.Errorf("forked %v, timed out %v, signal %v, leader alive %v", r.res.Forked, r.res.TimedOut, r.res.Signal, alive(r.res.PID))
	}
	began := time.Now()
	e.Close()
	// Under 5s: the server exited as its request channel closed, and was
	// not killed.
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("Close took %s", took)
	}
	if left := groupLeft(srv.pgid); len(left) > 0 || alive(pid) {
		t.Errorf("processes of the server's group left after Close: %v (the server %d alive %v)", left, pid, alive(pid))
	}
	// Nor a zombie of ours: re-parented to the test (a subreaper once a
	// trial has run), the server that took over is reaped by Close.
	if st, err := procfs.ReadStat(pid); err == nil && st.PPID == os.Getpid() {
		t.Errorf("the server %d is left as a child of ours: %+v", pid, st)
	}
}

// A forked trial writes to FIFOs that batchfit reads (trial.Launch), so a
// log that cannot be written loses none of its output: its stderr is all in
// the result, the write error is the trial's, and the adapter's word that
// it could not write its report either (both on /dev/full, which refuses
// every write with ENOSPC, as a full disk does) is in the stream.
func TestForkedOutputOnAFullDisk(t *testing.T) {
	h := newHarness(t)
	e := h.executor()
	h.run(e, h.spec(1, "show.py")) // teaches the server show.py's imports
	spec := h.spec(2, "show.py")
	spec.StderrPath = "/dev/full"
	spec.Env = append(adapter.Without(spec.Env, adapter.ReportEnv), adapter.ReportEnv+"=/dev/full")
	res, err := e.Run(context.Background(), spec, nil)
	var le *trial.LogError
	if !errors.As(err, &le) || le.Path != "/dev/full" || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Run: %v, want a *trial.LogError for /dev/full: ENOSPC", err)
	}
	if !res.Forked || res.ExitCode != 0 {
		t.Fatalf("forked %v, exit %d: %s", res.Forked, res.ExitCode, h.notices())
	}
	if !strings.Contains(string(res.StderrTail), "to stderr\n") {
		t.Errorf("stderr tail %q", res.StderrTail)
	}
	if lost := res.Matches.ReportLost(); lost == nil || lost.Path != "/dev/full" || !errors.Is(lost, syscall.ENOSPC) {
		t.Errorf("ReportLost() = %v, want /dev/full: ENOSPC; stderr tail %q", lost, res.StderrTail)
	}
	if out, _ := os.ReadFile(spec.StdoutPath); !strings.HasPrefix(string(out), "{") {
		t.Errorf("stdout log %q", out)
	}
}
