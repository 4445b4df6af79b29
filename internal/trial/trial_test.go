package trial

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/procfs"
)

// run runs testdata/<script> with its log files in a temporary directory
// and pidFile (a new one if "") as its one argument. It registers a cleanup
// that kills whatever pids the script wrote, so a failing test leaves no
// processes behind. It may be called from a goroutine: it never stops the
// test itself.
func run(t *testing.T, ctx context.Context, script, pidFile string, mod func(*Spec), w Watcher) (Result, string) {
	t.Helper()
	dir := t.TempDir()
	if pidFile == "" {
		pidFile = filepath.Join(dir, "pids")
	}
	spec := Spec{
		Argv:       []string{filepath.Join("testdata", script), pidFile},
		StdoutPath: filepath.Join(dir, "stdout.log"),
		StderrPath: filepath.Join(dir, "stderr.log"),
		Timeout:    time.Minute, // a safety net; tests that time out set less
	}
	if mod != nil {
		mod(&spec)
	}
	t.Cleanup(func() {
		for _, pid := range readPids(t, pidFile) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	res, err := Run(ctx, spec, w)
	if err != nil {
		t.Errorf("Run: %v", err)
	}
	return res, pidFile
}

func readPids(t *testing.T, path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file: %v", err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitPids waits until the script has written n pids.
func waitPids(t *testing.T, path string, n int) []int {
	t.Helper()
	for i := 0; i < 2000; i++ {
		if pids := readPids(t, path); len(pids) >= n {
			return pids
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: fewer than %d pids", path, n)
	return nil
}

// assertGone fails unless every pid is gone: not running, and not a zombie
// either (orphans reparented to batchfit must be reaped).
func assertGone(t *testing.T, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			st, _ := procfs.ReadStat(pid)
			t.Errorf("process %d is still there (state %c)", pid, st.State)
		}
	}
}

func TestOOMTrainer(t *testing.T) {
	t.Parallel()
	res, _ := run(t, context.Background(), "oom.sh", "", nil, nil)
	if res.ExitCode != 1 || res.Signal != 0 || res.TimedOut || res.Canceled || res.Orphans != 0 {
		t.Fatalf("result %+v", res)
	}
	if !bytes.Contains(res.StderrTail, []byte("torch.OutOfMemoryError: CUDA out of memory.")) {
		t.Errorf("stderr tail %q", res.StderrTail)
	}
	if !bytes.Contains(res.StdoutTail, []byte("epoch 0 step 0")) {
		t.Errorf("stdout tail %q", res.StdoutTail)
	}
	got := classify.Classify(classify.Input{ExitCode: res.ExitCode, Signal: res.Signal, Output: res.Output()})
	if got.Outcome != classify.OOM {
		t.Errorf("classified as %s (%s)", got.Outcome, got.Reason)
	}
	if res.PID <= 0 || res.Start.IsZero() || res.Duration <= 0 {
		t.Errorf("pid %d, start %v, duration %v", res.PID, res.Start, res.Duration)
	}
	assertGone(t, res.PID)
}

func TestKilledBySignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		script string
		sig    syscall.Signal
		want   classify.Outcome
	}{
		{"sigkill.sh", syscall.SIGKILL, classify.Crash}, // no OOM evidence
		{"segv.sh", syscall.SIGSEGV, classify.Crash},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			t.Parallel()
			res, _ := run(t, context.Background(), tt.script, "", nil, nil)
			if res.ExitCode != -1 || res.Signal != tt.sig || res.TimedOut || res.Canceled {
				t.Fatalf("result %+v", res)
			}
			got := classify.Classify(classify.Input{ExitCode: res.ExitCode, Signal: res.Signal, HostOOMEvidence: res.HostOOMEvidence, Output: res.Output()})
			if got.Outcome != tt.want {
				t.Errorf("classified as %s (%s)", got.Outcome, got.Reason)
			}
		})
	}
}

func TestTimeoutKillsTheGroup(t *testing.T) {
	t.Parallel()
	res, pidFile := run(t, context.Background(), "hang.sh", "", func(s *Spec) {
		s.Timeout = 300 * time.Millisecond
	}, nil)
	if !res.TimedOut || res.Canceled || res.Signal != syscall.SIGTERM {
		t.Fatalf("result %+v", res)
	}
	assertGone(t, append(waitPids(t, pidFile, 1), res.PID)...)
}

func TestGraceThenSIGKILL(t *testing.T) {
	t.Parallel()
	res, pidFile := run(t, context.Background(), "ignoreterm.sh", "", func(s *Spec) {
		s.Timeout = 300 * time.Millisecond
		s.Grace = 200 * time.Millisecond
	}, nil)
	if !res.TimedOut || res.Signal != syscall.SIGKILL {
		t.Fatalf("result %+v", res)
	}
	assertGone(t, append(waitPids(t, pidFile, 1), res.PID)...)
}

func TestCleanExitWithinGrace(t *testing.T) {
	t.Parallel()
	res, pidFile := run(t, context.Background(), "trapterm.sh", "", func(s *Spec) {
		s.Timeout = 300 * time.Millisecond
		s.Grace = 30 * time.Second // it must not take this long
	}, nil)
	if !res.TimedOut || res.ExitCode != 0 || res.Signal != 0 {
		t.Fatalf("result %+v", res)
	}
	if !bytes.Contains(res.StdoutTail, []byte("got TERM, saving checkpoint")) {
		t.Errorf("stdout %q", res.StdoutTail)
	}
	if res.Duration >= 30*time.Second {
		t.Errorf("waited out the grace period: %v", res.Duration)
	}
	assertGone(t, append(waitPids(t, pidFile, 1), res.PID)...)
}

// startWatcher reports the pid it was given and checks that stop comes only
// after the trial's process group is gone.
type startWatcher struct {
	started chan int
	mu      sync.Mutex
	stopped bool
	groupAt error // kill(-pgid, 0) when stop was called
}

func (w *startWatcher) Watch(pid int) func() {
	w.started <- pid
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.stopped = true
		w.groupAt = syscall.Kill(-pid, 0)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &startWatcher{started: make(chan int, 1)}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	done := make(chan Result)
	go func() {
		res, _ := run(t, ctx, "hang.sh", pidFile, nil, w)
		done <- res
	}()
	var pid int
	select {
	case pid = <-w.started:
	case res := <-done:
		t.Fatalf("the trial ended before it started: %+v", res)
	}
	children := waitPids(t, pidFile, 1) // the trial is running for real
	cancel()
	res := <-done
	if !res.Canceled || res.TimedOut || res.PID != pid {
		t.Fatalf("result %+v", res)
	}
	got := classify.Classify(classify.Input{Canceled: res.Canceled, ExitCode: res.ExitCode, Signal: res.Signal})
	if got.Outcome != classify.Canceled {
		t.Errorf("classified as %s", got.Outcome)
	}
	w.mu.Lock()
	if !w.stopped || !errors.Is(w.groupAt, syscall.ESRCH) {
		t.Errorf("watcher stopped %v, group at stop: %v", w.stopped, w.groupAt)
	}
	w.mu.Unlock()
	assertGone(t, append(children, pid)...)
}

func TestCanceledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, Spec{Argv: []string{"testdata/oom.sh"}}, nil)
	if err != nil || !res.Canceled || res.PID != 0 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

func TestLeftoversAreKilled(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid(1) from util-linux is not installed; the escape test needs it")
	}
	// A child of this process that has nothing to do with the trial: the
	// cleanup must leave it alone.
	bystander := exec.Command("sleep", "1000")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })

	res, pidFile := run(t, context.Background(), "leftovers.sh", "", nil, nil)
	if res.ExitCode != 0 || res.Signal != 0 || res.TimedOut {
		t.Fatalf("result %+v", res)
	}
	pids := readPids(t, pidFile)
	if len(pids) != 2 {
		t.Fatalf("pids %v", pids)
	}
	if res.Orphans != 2 {
		t.Errorf("Orphans = %d, want 2", res.Orphans)
	}
	assertGone(t, append(pids, res.PID)...)
	if err := bystander.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("an unrelated child was killed: %v", err)
	}
}

// TestConcurrentTrials runs a trial that leaves orphans while another one
// is running: the first one's cleanup must not touch the second.
func TestConcurrentTrials(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid(1) from util-linux is not installed; the escape test needs it")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &startWatcher{started: make(chan int, 1)}
	pidFile := filepath.Join(t.TempDir(), "pids")
	done := make(chan Result)
	go func() {
		res, _ := run(t, ctx, "hang.sh", pidFile, nil, w)
		done <- res
	}()
	var pid int
	select {
	case pid = <-w.started:
	case res := <-done:
		t.Fatalf("the trial ended before it started: %+v", res)
	}
	children := waitPids(t, pidFile, 1)

	res, _ := run(t, context.Background(), "leftovers.sh", "", nil, nil)
	if res.Orphans != 2 {
		t.Errorf("Orphans = %d, want 2", res.Orphans)
	}
	for _, p := range append(children, pid) {
		if err := syscall.Kill(p, 0); err != nil {
			t.Errorf("process %d of the other trial: %v", p, err)
		}
	}
	cancel()
	other := <-done
	if !other.Canceled {
		t.Errorf("other trial %+v", other)
	}
	assertGone(t, append(children, pid)...)
}

func TestTailsAndLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := Spec{
		Argv:       []string{"testdata/bigoutput.sh"},
		StdoutPath: filepath.Join(dir, "out.log"),
		StderrPath: filepath.Join(dir, "err.log"),
		TailBytes:  1000,
	}
	res, err := Run(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(spec.StdoutPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(full, []byte("\n")); n != 2000 {
		t.Fatalf("log file has %d lines, want all 2000", n)
	}
	if len(res.StdoutTail) != 1000 || !bytes.HasSuffix(full, res.StdoutTail) {
		t.Errorf("stdout tail of %d bytes is not the end of the log", len(res.StdoutTail))
	}
	if string(res.StderrTail) != "warning: first\nwarning: second\nerror: last\n" {
		t.Errorf("stderr tail %q", res.StderrTail)
	}
	fi, err := os.Stat(spec.StderrPath)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("stderr log: %v %v", fi.Mode(), err)
	}
	if out := res.Output(); !bytes.HasPrefix(out, res.StderrTail) || !bytes.HasSuffix(out, res.StdoutTail) {
		t.Errorf("Output is not stderr tail then stdout tail")
	}
}

func TestOneCombinedLog(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "trial.log")
	res, err := Run(context.Background(), Spec{Argv: []string{"testdata/oom.sh"}, StdoutPath: log, StderrPath: log}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(log)
	if !bytes.Contains(b, []byte("epoch 0 step 0")) || !bytes.Contains(b, []byte("CUDA out of memory")) {
		t.Errorf("combined log %q", b)
	}
	if res.ExitCode != 1 {
		t.Errorf("result %+v", res)
	}
}

func TestNoLogPaths(t *testing.T) {
	t.Parallel()
	res, err := Run(context.Background(), Spec{Argv: []string{"testdata/oom.sh"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(res.StderrTail, []byte("CUDA out of memory")) {
		t.Errorf("stderr tail %q", res.StderrTail)
	}
}

func TestEnvDirAndPath(t *testing.T) {
	t.Parallel()
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	// "env.sh" is found through the PATH of the child's environment, not
	// this process's, and runs in Dir.
	spec := Spec{
		Argv:       []string{"env.sh"},
		Env:        []string{"PATH=/usr/bin:/bin:" + testdata, "BATCHFIT_BATCH_SIZE=256", cookieEnv + "=inherited"},
		Dir:        work,
		StdoutPath: filepath.Join(t.TempDir(), "out.log"),
	}
	res, err := Run(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "size=256\ndir=" + work + "\ncookie=set\n"
	if string(res.StdoutTail) != want {
		t.Errorf("stdout %q, want %q", res.StdoutTail, want)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	testdata, _ := filepath.Abs("testdata")
	tests := []struct {
		name   string
		spec   Spec
		op     string
		is     error
		hinted string
	}{
		{"not found", Spec{Argv: []string{"batchfit-no-such-command"}}, "find command", exec.ErrNotFound, "PATH"},
		{"missing path", Spec{Argv: []string{"./no-such-script.sh"}}, "find command", exec.ErrNotFound, "PATH"},
		{"not executable", Spec{Argv: []string{"testdata/notexec.sh"}}, "find command", fs.ErrPermission, "chmod +x"},
		{"a directory", Spec{Argv: []string{"./testdata"}}, "find command", syscall.EISDIR, "not a directory"},
		{"no #! line", Spec{Argv: []string{filepath.Join(testdata, "noshebang")}}, "start", syscall.ENOEXEC, "interpreter"},
		{"bad dir", Spec{Argv: []string{"/bin/true"}, Dir: "/no/such/dir"}, "check working directory", fs.ErrNotExist, "working directory"},
		{"dir is a file", Spec{Argv: []string{"/bin/true"}, Dir: "testdata/oom.sh"}, "check working directory", syscall.ENOTDIR, ""},
		{"log dir missing", Spec{Argv: []string{"/bin/true"}, StdoutPath: "/no/such/dir/out.log"}, "create log", fs.ErrNotExist, "log directory"},
		{"empty argv", Spec{}, "find command", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.spec, nil)
			var se *StartError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *StartError", err)
			}
			if se.Op != tt.op || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("err = %v (op %q), want op %q and %v", err, se.Op, tt.op, tt.is)
			}
			if !strings.Contains(se.Hint(), tt.hinted) {
				t.Errorf("hint %q, want it to mention %q", se.Hint(), tt.hinted)
			}
			if msg := err.Error(); msg != strings.ToLower(msg[:1])+msg[1:] {
				t.Errorf("error %q does not start lower-case", msg)
			}
		})
	}
}

// fakeOOM returns the counts in order, then repeats the last.
type fakeOOM struct {
	mu     sync.Mutex
	counts []uint64
	ok     bool
}

func (f *fakeOOM) OOMKills() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.counts[0]
	if len(f.counts) > 1 {
		f.counts = f.counts[1:]
	}
	return n, f.ok
}

var _ OOMCounter = (*fakeOOM)(nil)

func TestHostOOMEvidence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fake *fakeOOM
		want bool
	}{
		{"count rose", &fakeOOM{counts: []uint64{4, 5}, ok: true}, true},
		{"count unchanged", &fakeOOM{counts: []uint64{4, 4}, ok: true}, false},
		{"no counter", &fakeOOM{counts: []uint64{0, 9}, ok: false}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, _ := run(t, context.Background(), "sigkill.sh", "", func(s *Spec) { s.OOMKills = tt.fake }, nil)
			if res.HostOOMEvidence != tt.want {
				t.Fatalf("HostOOMEvidence = %v, want %v", res.HostOOMEvidence, tt.want)
			}
			got := classify.Classify(classify.Input{ExitCode: res.ExitCode, Signal: res.Signal, HostOOMEvidence: res.HostOOMEvidence, Output: res.Output()})
			want := classify.Crash
			if tt.want {
				want = classify.HostOOM
			}
			if got.Outcome != want {
				t.Errorf("classified as %s (%s), want %s", got.Outcome, got.Reason, want)
			}
		})
	}
}
