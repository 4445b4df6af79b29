// Package trial runs one trial: one command as a fresh process in its own
// process group, with a time limit, its output in log files, and nothing of
// it left running afterwards. It knows nothing about batch sizes or search;
// internal/classify says what its Result means.
package trial

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/procgroup"
)

// Defaults for the zero values of Spec.
const (
	DefaultGrace     = 5 * time.Second
	DefaultTailBytes = 64 << 10
)

// pollInterval is how often the process tree is walked while a trial runs,
// so that descendants which escape the process group are remembered.
const pollInterval = 100 * time.Millisecond

// cookieEnv is set to a value unique to each trial in the trial's
// environment. Descendants inherit it, so at the end of a trial a process
// that escaped both the process group (setsid) and the tree walk (it forked
// and its parent exited between two walks) is still recognised as ours.
const cookieEnv = "BATCHFIT_TRIAL_COOKIE"

// Spec says what to run.
type Spec struct {
	Argv    []string
	Env     []string      // complete environment of the child; nil means os.Environ()
	Dir     string        // working directory; "" means batchfit's
	Timeout time.Duration // 0 means none
	Grace   time.Duration // between SIGTERM and SIGKILL; 0 means DefaultGrace
	// StdoutPath and StderrPath are the log files, created (truncated) with
	// mode 0644; their directory must exist. The same path for both gives one
	// combined log. "" keeps the stream only long enough to read its tail.
	StdoutPath, StderrPath string
	TailBytes              int // how much of each stream's end Result keeps; 0 means DefaultTailBytes
	// OOMKills counts kernel OOM kills, read before and after the trial for
	// Result.HostOOMEvidence. nil means the counter of batchfit's own cgroup
	// (the trial runs in it), or the kernel's when there is none.
	OOMKills OOMCounter
	// OnSpawn, when set, is called right after the trial's leader starts,
	// with what a later batchfit needs to stop the trial should this one
	// die first; done, if not nil, is called once no process of the trial
	// is left.
	OnSpawn func(p Process) (done func())
	// Launcher, when set, starts the leader instead of an exec by batchfit.
	Launcher Launcher
}

// Watcher observes a running trial, e.g. samples the GPU memory of the
// process tree rooted at pid. Watch is called right after the process
// starts; stop is called once the whole process group is gone.
type Watcher interface {
	Watch(pid int) (stop func())
}

// Result is what happened to one trial.
type Result struct {
	PID      int
	ExitCode int            // -1 if a signal killed the leader
	Signal   syscall.Signal // the signal that killed the leader; 0 if it exited
	TimedOut bool           // batchfit killed it for running past Spec.Timeout
	Canceled bool           // batchfit killed it because ctx was canceled
	// HostOOMEvidence is set when the OOM-kill count rose during the trial.
	// The count is per cgroup, so a concurrent trial's OOM kill counts too.
	HostOOMEvidence bool
	Start           time.Time
	Duration        time.Duration // from start until the leader exited
	StdoutTail      []byte
	StderrTail      []byte
	// Matches are the error signatures found in the whole of both logs,
	// read as the trial wrote them; nil if the logs could not be read, and
	// then internal/classify reads the tails.
	Matches *classify.Matches
	// Orphans counts processes of the trial (dataloader workers, torchrun
	// ranks, daemons) that were still alive after the leader exited and had
	// to be killed.
	Orphans int
	// Forked is set when the leader was forked from a fork server that had
	// preloaded the program's modules (internal/forkserver) rather than
	// started afresh.
	Forked bool
}

// Output is the tail of stderr followed by the tail of stdout: errors first,
// which is the order internal/classify wants.
func (r Result) Output() []byte {
	out := make([]byte, 0, len(r.StderrTail)+1+len(r.StdoutTail))
	out = append(out, r.StderrTail...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, r.StdoutTail...)
}

// StartError means the trial could not be started at all: the command was
// not found or is not executable, the working directory is missing, a log
// file could not be created.
type StartError struct {
	Op    string // what failed: "find command", "check working directory", "create log", "start"
	Argv0 string
	Err   error
}

func (e *StartError) Error() string {
	if e.Argv0 == "" {
		return fmt.Sprintf("start trial: %v", e.Err)
	}
	return fmt.Sprintf("start %s: %s: %v", e.Argv0, e.Op, e.Err)
}

// notFound is a command that does not exist; errors.Is(err,
// exec.ErrNotFound) holds for it.
type notFound string

func (e notFound) Error() string        { return string(e) }
func (e notFound) Is(target error) bool { return target == exec.ErrNotFound }

func (e *StartError) Unwrap() error { return e.Err }

// Hint suggests a fix, for the CLI to print after the error.
func (e *StartError) Hint() string {
	switch {
	case errors.Is(e.Err, exec.ErrNotFound):
		return "check the command name and PATH, or give its path (./train.sh)"
	case errors.Is(e.Err, syscall.ENOEXEC):
		return "the file has no #! line; run it through its interpreter (python train.py)"
	case errors.Is(e.Err, syscall.EISDIR):
		return "give the program to run, not a directory"
	case e.Op == "find command" && errors.Is(e.Err, fs.ErrPermission):
		return "make it executable (chmod +x) or run it through its interpreter (python train.py)"
	case e.Op == "check working directory":
		return "the working directory must exist"
	case e.Op == "create log":
		return "the log directory must exist and be writable"
	}
	return ""
}

var (
	subreaperOnce sync.Once
	trialSeq      atomic.Uint64
)

// Run runs spec to completion. The returned error is always a *StartError
// and only means the trial never started; everything that happens once it
// has started is in Result. Canceling ctx kills the trial's whole process
// group (SIGTERM, then SIGKILL after the grace period) and sets Canceled.
// The trial reads /dev/null: the terminal belongs to batchfit.
//
// When Run returns, no process of the trial is left: whatever survived its
// leader was killed (SIGKILL) and counted in Orphans. Run is safe to call
// from several goroutines; each trial kills only its own processes.
func Run(ctx context.Context, spec Spec, w Watcher) (Result, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return Result{}, &StartError{Op: "find command", Err: errors.New("empty command")}
	}
	if ctx.Err() != nil {
		return Result{Canceled: true, ExitCode: -1}, nil
	}
	grace, tailBytes := spec.limits()
	argv0 := spec.Argv[0]
	env := spec.Env
	if env == nil {
		env = os.Environ()
	}
	path, err := findCommand(spec, env)
	if err != nil {
		return Result{}, err
	}
	logs, err := openLogs(spec.StdoutPath, spec.StderrPath)
	if err != nil {
		return Result{}, &StartError{Op: "create log", Argv0: argv0, Err: err}
	}
	defer logs.close()

	becomeSubreaper()

	cookie := newCookie()
	counter := spec.OOMKills
	if counter == nil {
		counter = hostOOMCounter{root: "/"}
	}
	oomBefore, oomOK := counter.OOMKills()

	start := time.Now()
	lead, cg, err := launch(spec, path, withCookie(env, cookie), logs, newCgroup(cookie))
	if err != nil {
		return Result{}, &StartError{Op: "start", Argv0: argv0, Err: err}
	}
	pid := lead.PID()
	res := Result{PID: pid, Start: start}
	proc := processOf(pid, cookie, cg)
	if spec.OnSpawn != nil {
		if done := spec.OnSpawn(proc); done != nil {
			defer done()
		}
	}
	scan := startLogScan(logs.stderr.Name(), logs.stdout.Name())
	stopWatch := func() {}
	if w != nil {
		stopWatch = w.Watch(pid)
	}

	tr := newTracker(pid, cookie)
	tr.cgroup = proc.Cgroup
	stopPolling := tr.pollUntilStopped()
	awaitEnd(ctx, spec.Timeout, tr, pid, lead.Exited(), grace, &res)
	res.Duration = time.Since(start)
	stopPolling()

	// The leader is an unreaped zombie until Reap below, so its pid,
	// which is also the group id, cannot be reused by another process while
	// the leftovers are killed.
	res.Orphans = tr.killLeftovers()
	res.ExitCode, res.Signal = lead.Reap()
	if cg != nil {
		cg.close()
	}
	stopWatch()

	if oomOK {
		after, ok := counter.OOMKills()
		res.HostOOMEvidence = ok && after > oomBefore
	}
	res.StdoutTail = ReadTail(logs.stdout.Name(), 0, tailBytes)
	res.StderrTail = ReadTail(logs.stderr.Name(), 0, tailBytes)
	res.Matches = scan.finish()
	return res, nil
}

// limits returns the spec's grace and tail size, or their defaults.
func (spec Spec) limits() (grace time.Duration, tailBytes int) {
	grace, tailBytes = spec.Grace, spec.TailBytes
	if grace <= 0 {
		grace = DefaultGrace
	}
	if tailBytes <= 0 {
		tailBytes = DefaultTailBytes
	}
	return grace, tailBytes
}

// commandMaker returns how to make the trial's command, in cgroup cg when
// there is one: one process group for the trial and its children, killable
// as a whole, whose leader dies with batchfit; and where there can be one,
// a cgroup that nothing of the trial can leave.
func commandMaker(path string, spec Spec, env []string, l *logs) func(cg *cgroup) *exec.Cmd {
	return func(cg *cgroup) *exec.Cmd {
		attr := procgroup.Attr()
		if cg != nil {
			cg.attach(attr)
		}
		return &exec.Cmd{
			Path:        path,
			Args:        spec.Argv,
			Env:         env,
			Dir:         spec.Dir,
			Stdout:      l.stdout,
			Stderr:      l.stderr,
			SysProcAttr: attr,
		}
	}
}

// launch starts the trial's leader: through spec.Launcher when set, else as
// batchfit's own child. It returns the cgroup the leader runs in, if any.
func launch(spec Spec, path string, env []string, l *logs, cg *cgroup) (Leader, *cgroup, error) {
	if spec.Launcher == nil {
		cmd, cg, err := startIn(commandMaker(path, spec, env, l), cg)
		if err != nil {
			return nil, nil, err
		}
		return &execLeader{cmd: cmd, exited: procgroup.WaitExit(cmd.Process.Pid)}, cg, nil
	}
	req := Launch{Argv: spec.Argv, Env: env, Dir: spec.Dir, Stdout: l.stdout.Name(), Stderr: l.stderr.Name()}
	if cg != nil {
		req.Cgroup = cg.path
	}
	lead, err := spec.Launcher.Launch(req)
	if err != nil {
		if cg != nil {
			cg.close()
		}
		return nil, nil, err
	}
	if cg != nil && !lead.InCgroup() {
		cg.close()
		cg = nil
	}
	return lead, cg, nil
}

// Launcher starts a trial's leader otherwise than by batchfit exec'ing the
// command: a fork server's child (internal/forkserver). Run does the rest
// as for any trial: the time limit, the kill of the group and of every
// descendant, the logs, the cgroup.
type Launcher interface {
	Launch(l Launch) (Leader, error)
}

// Launch is the trial a Launcher is to start. The leader must lead its own
// process group, read /dev/null, write to the log files (created already;
// the same path twice is one combined log), run in Dir with exactly Env,
// and start in the cgroup directory Cgroup when it is not "".
type Launch struct {
	Argv           []string
	Env            []string
	Dir            string
	Stdout, Stderr string
	Cgroup         string
}

// Leader is a started trial leader.
type Leader interface {
	PID() int
	// InCgroup reports whether the leader started in Launch.Cgroup.
	InCgroup() bool
	// Exited is closed once the leader has exited. Until Reap its pid, the
	// trial's process group id, stays reserved (an unreaped zombie).
	Exited() <-chan struct{}
	// Reap releases the pid and says how the leader ended: its exit code
	// (-1 when a signal killed it) and the signal that did.
	Reap() (code int, sig syscall.Signal)
}

// execLeader is a leader that batchfit started itself.
type execLeader struct {
	cmd    *exec.Cmd
	exited <-chan struct{}
}

func (e *execLeader) PID() int                { return e.cmd.Process.Pid }
func (e *execLeader) InCgroup() bool          { return true } // not asked: startIn returns its cgroup
func (e *execLeader) Exited() <-chan struct{} { return e.exited }
func (e *execLeader) Reap() (int, syscall.Signal) {
	_ = e.cmd.Wait()
	return exitStatus(e.cmd)
}

// processOf names the started trial as the history records it: its pid,
// start time, cookie and cgroup.
func processOf(pid int, cookie string, cg *cgroup) Process {
	proc := Process{PID: pid, Cookie: cookie}
	if st, err := procfs.ReadStat(pid); err == nil {
		proc.Start = st.Start
	}
	if cg != nil {
		proc.Cgroup = cg.path
	}
	return proc
}

// findCommand checks the working directory and finds the program to run.
func findCommand(spec Spec, env []string) (string, error) {
	argv0 := spec.Argv[0]
	if spec.Dir != "" {
		fi, err := os.Stat(spec.Dir)
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s: %w", spec.Dir, syscall.ENOTDIR)
		}
		if err != nil {
			return "", &StartError{Op: "check working directory", Argv0: argv0, Err: err}
		}
	}
	path, err := LookPath(argv0, spec.Dir, env)
	if err != nil {
		return "", &StartError{Op: "find command", Argv0: argv0, Err: err}
	}
	return path, nil
}

// startIn starts the command in cg, or without a cgroup when cg is nil or
// the start into it fails: clone3 into a cgroup can fail where a plain
// fork works (a seccomp filter, a cgroup the kernel refuses), and the
// process group and the tracker still stop the trial. It returns the
// cgroup the trial runs in, if any.
func startIn(newCmd func(*cgroup) *exec.Cmd, cg *cgroup) (*exec.Cmd, *cgroup, error) {
	cmd := newCmd(cg)
	err := cmd.Start()
	if err != nil && cg != nil {
		cg.close()
		cg = nil
		cmd = newCmd(nil)
		err = cmd.Start()
	}
	return cmd, cg, err
}

// pollUntilStopped walks the trial's process tree in the background until
// the returned function is called, which waits for the last walk.
func (t *tracker) pollUntilStopped() (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			began := time.Now()
			t.poll()
			// Without children files a walk reads every process's stat,
			// which takes milliseconds on a busy node: walk less often
			// rather than spend more than a tenth of a core on it. The
			// cookie scan at the end catches what the walks miss.
			wait := max(pollInterval, 10*time.Since(began))
			select {
			case <-quit:
				return
			case <-time.After(wait):
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// awaitEnd waits for the leader to exit, or stops the whole trial when the
// context ends (Canceled) or the time limit passes (TimedOut).
func awaitEnd(ctx context.Context, limit time.Duration, tr *tracker, leader int, exited <-chan struct{}, grace time.Duration, res *Result) {
	var timeout <-chan time.Time
	if limit > 0 {
		timer := time.NewTimer(limit)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case <-exited:
	case <-ctx.Done():
		res.Canceled = true
		stop(ctx, tr, leader, exited, grace, res)
	case <-timeout:
		res.TimedOut = true
		stop(ctx, tr, leader, exited, grace, res)
	}
}

// exitStatus is the leader's exit code (-1 when a signal killed it) and
// the signal that did.
func exitStatus(cmd *exec.Cmd) (int, syscall.Signal) {
	if cmd.ProcessState == nil {
		return -1, 0
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return -1, ws.Signal()
	}
	return ws.ExitStatus(), 0
}

// stop asks the trial to end (SIGTERM to the group and to every known
// descendant outside it), waits up to grace for the leader to exit, then
// kills (SIGKILL). A cancel during a timeout's grace period skips the rest
// of the wait: the user asked to stop now.
func stop(ctx context.Context, tr *tracker, leader int, exited <-chan struct{}, grace time.Duration, res *Result) {
	tr.signalAll(syscall.SIGTERM)
	_ = unix.Kill(leader, syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	var canceled <-chan struct{}
	if !res.Canceled {
		canceled = ctx.Done()
	}
	select {
	case <-exited:
		return
	case <-timer.C:
	case <-canceled:
		res.Canceled = true
	}
	tr.signalAll(syscall.SIGKILL)
	_ = unix.Kill(leader, syscall.SIGKILL)
	<-exited
}

// becomeSubreaper makes orphans of the trials' processes reparent to
// batchfit instead of init, so they stay findable (and reapable) until
// their trial's cleanup. It is process-wide and done once.
func becomeSubreaper() {
	subreaperOnce.Do(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}

func newCookie() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%d-%d-%s", os.Getpid(), trialSeq.Add(1), hex.EncodeToString(b[:]))
}

// withCookie returns env with this trial's cookie, replacing any inherited
// one (batchfit may itself run inside a trial).
func withCookie(env []string, cookie string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, cookieEnv+"=") {
			out = append(out, kv)
		}
	}
	return append(out, cookieEnv+"="+cookie)
}

// LookPath finds argv0 the way execvp would for the child: a name with a
// slash is a path (relative to dir), a bare name is searched in the PATH of
// the child's environment, not batchfit's.
func LookPath(argv0, dir string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", err
		}
		return argv0, nil
	}
	pathEnv, found := "", false
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			pathEnv, found = v, true
			break
		}
	}
	if !found {
		pathEnv = os.Getenv("PATH")
	}
	var firstErr error
	for _, d := range filepath.SplitList(pathEnv) {
		// Relative PATH entries would depend on the working directory;
		// os/exec refuses them for the same reason.
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, argv0)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && (errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EISDIR)) {
			firstErr = fmt.Errorf("%s: %w", p, err)
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", notFound("not in PATH")
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return notFound("no such file")
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return syscall.EISDIR
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("not executable: %w", fs.ErrPermission)
	}
	return nil
}

// logs are the files the trial writes to. The child gets the files
// themselves, not pipes: nothing in batchfit has to copy output, and a
// descendant that outlives the leader cannot hold up the end of the trial
// by keeping a pipe open.
type logs struct {
	stdout, stderr *os.File
	temp           []string // files to remove when done
}

func openLogs(stdoutPath, stderrPath string) (*logs, error) {
	l := &logs{}
	var err error
	if l.stdout, err = l.open(stdoutPath, "stdout"); err != nil {
		return nil, err
	}
	if stderrPath != "" && stderrPath == stdoutPath {
		l.stderr = l.stdout
		return l, nil
	}
	if l.stderr, err = l.open(stderrPath, "stderr"); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

func (l *logs) open(path, stream string) (*os.File, error) {
	f, temp, err := OpenLog(path, "batchfit-"+stream+"-*")
	if temp {
		l.temp = append(l.temp, f.Name())
	}
	return f, err
}

// OpenLog opens a log file as Spec says of its log paths: the file at path,
// created (truncated) with mode 0644. With path "" it creates a temporary
// file instead, named after pattern as os.CreateTemp does, and temp says
// that the caller must remove it.
func OpenLog(path, pattern string) (f *os.File, temp bool, err error) {
	if path == "" {
		f, err := os.CreateTemp("", pattern)
		if err != nil {
			return nil, false, err
		}
		return f, true, nil
	}
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	return f, false, err
}

func (l *logs) close() {
	if l.stdout != nil {
		l.stdout.Close()
	}
	if l.stderr != nil && l.stderr != l.stdout {
		l.stderr.Close()
	}
	for _, p := range l.temp {
		os.Remove(p)
	}
}

// ReadTail returns the last n bytes of the file at path, but none from
// before offset from (a log that earlier runs wrote to); nil if it cannot be
// read. It opens the file afresh: a child writing to it shares the offset of
// the descriptor it was given.
func ReadTail(path string, from int64, n int) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(fi.Size()-int64(n), from, 0)
	if off > fi.Size() {
		off = fi.Size()
	}
	b, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return nil
	}
	return b
}
