// Package trial runs one trial: one command as a fresh process in its own
// process group, with a time limit, its output in log files, and nothing of
// it left running afterwards. It knows nothing about batch sizes or search;
// internal/classify says what its Result means.
package trial

import (
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
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
	// combined log. "" writes no log: the stream is only scanned and its
	// tail kept.
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
	// OnSubmit, when set, is called by an executor that hands the trial to
	// a batch scheduler (internal/slurm) before it submits the job, with
	// the job's name, unique to the trial: should batchfit die before the
	// scheduler returns the job's id, a later batchfit finds the job by
	// it. submitted, if not nil, is told that id; done, if not nil, is
	// called once the job has left the queue, and not when that is unsure.
	OnSubmit func(name string) (submitted func(jobID string), done func())
	// Launcher, when set, starts the leader instead of an exec by batchfit.
	Launcher Launcher
	// Gate, when set, holds the trial at the start of its GPU work until
	// the gate opens (see Gate); its time limit starts then. Not with a
	// Launcher.
	Gate *Gate
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
	Start           time.Time     // when it started, or its gate opened (Spec.Gate)
	Duration        time.Duration // from Start until the leader exited
	StdoutTail      []byte
	StderrTail      []byte
	// Matches are the error signatures found in the whole of both
	// streams, as the trial wrote them (whatever reached the log files);
	// nil from an executor that has none, and then internal/classify reads
	// the tails.
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
// file or the pipes to it could not be created.
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

var trialSeq atomic.Uint64

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

// Launcher starts a trial's leader otherwise than by batchfit exec'ing the
// command: a fork server's child (internal/forkserver). Run does the rest
// as for any trial: the time limit, the kill of the group and of every
// descendant, the logs, the cgroup.
type Launcher interface {
	Launch(l Launch) (Leader, error)
}

// Launch is the trial a Launcher is to start. The leader must lead its own
// process group, read /dev/null, open Stdout and Stderr for writing and
// write its output there (FIFOs that batchfit reads, which copies them to
// the log files; the same path twice is one combined stream), run in Dir
// with exactly Env, and start in the cgroup directory Cgroup when it is not
// "".
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

func newCookie() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%d-%d-%s", os.Getpid(), trialSeq.Add(1), hex.EncodeToString(b[:]))
}

// withCookie returns env with this trial's cookie and, when gate is not "",
// its gate (GateEnv's value), replacing any inherited ones: batchfit may
// itself run inside a trial, and an inherited gate is no trial's.
func withCookie(env []string, cookie, gate string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if !strings.HasPrefix(kv, cookieEnv+"=") && !strings.HasPrefix(kv, GateEnv+"=") {
			out = append(out, kv)
		}
	}
	out = append(out, cookieEnv+"="+cookie)
	if gate != "" {
		out = append(out, GateEnv+"="+gate)
	}
	return out
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
