package trial

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batchfit/batchfit/internal/procfs"
	"github.com/batchfit/batchfit/internal/procgroup"
)

// Run runs spec to completion. A *StartError means the trial never started;
// everything that happens once it has started is in Result, and the only
// error then is a *LogError: its output could not be written whole to a
// log file, and Result, decided from the output as it came, is complete.
// Canceling ctx kills the trial's whole process group (SIGTERM, then
// SIGKILL after the grace period) and sets Canceled. The trial reads
// /dev/null: the terminal belongs to batchfit.
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
	gateEnd, gateID, err := armGate(spec)
	if err != nil {
		return Result{}, &StartError{Op: "start", Argv0: argv0, Err: err}
	}
	defer spec.Gate.end()
	out, op, err := openOutput(spec.StdoutPath, spec.StderrPath, tailBytes, spec.Launcher != nil)
	if err != nil {
		gateEnd.Close() // nil without a gate: ErrInvalid, nothing to close
		return Result{}, &StartError{Op: op, Argv0: argv0, Err: err}
	}

	procgroup.BecomeSubreaper()

	cookie := newCookie()
	oomKills := countOOMKills(spec.OOMKills)

	start := time.Now()
	lead, cg, err := launch(spec, path, withCookie(env, cookie, gateID), gateEnd, out, newCgroup(cookie))
	gateEnd.Close() // the trial has its own copy (nil without a gate)
	if err != nil {
		_ = out.finish()
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
	stopWatch := func() {}
	if w != nil {
		stopWatch = w.Watch(pid)
	}

	tr := newTracker(pid, cookie)
	tr.cgroup = proc.Cgroup
	stopPolling := tr.pollUntilStopped()
	awaitGate(ctx, spec.Gate, tr, pid, lead.Exited(), &res)
	if !res.Canceled {
		awaitEnd(ctx, spec.Timeout, tr, pid, lead.Exited(), grace, &res)
	}
	res.Duration = time.Since(res.Start)
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

	res.HostOOMEvidence = oomKills()
	// No process of the trial is left to write to its streams.
	if err := out.into(&res); err != nil {
		return res, err
	}
	return res, nil
}

// countOOMKills reads counter's count of kernel OOM kills now (nil: the
// kernel's, or batchfit's cgroup's) and returns a function that says, once
// the trial is over, whether it rose meanwhile.
func countOOMKills(counter OOMCounter) (rose func() bool) {
	if counter == nil {
		counter = hostOOMCounter{root: "/"}
	}
	before, ok := counter.OOMKills()
	return func() bool {
		if !ok {
			return false
		}
		after, ok := counter.OOMKills()
		return ok && after > before
	}
}

// commandMaker returns how to make the trial's command, in cgroup cg when
// there is one: one process group for the trial and its children, killable
// as a whole, whose leader dies with batchfit; and where there can be one,
// a cgroup that nothing of the trial can leave.
func commandMaker(path string, spec Spec, env []string, gate *os.File, out *output) func(cg *cgroup) *exec.Cmd {
	return func(cg *cgroup) *exec.Cmd {
		attr := procgroup.Attr()
		if cg != nil {
			cg.attach(attr)
		}
		var extra []*os.File
		if gate != nil {
			extra = []*os.File{gate} // gateFD
		}
		return &exec.Cmd{
			ExtraFiles:  extra,
			Path:        path,
			Args:        spec.Argv,
			Env:         env,
			Dir:         spec.Dir,
			Stdout:      out.stdout.w,
			Stderr:      out.stderr.w,
			SysProcAttr: attr,
		}
	}
}

// launch starts the trial's leader: through spec.Launcher when set, else as
// batchfit's own child, with gate (when not nil) as its gateFD. It returns
// the cgroup the leader runs in, if any.
func launch(spec Spec, path string, env []string, gate *os.File, out *output, cg *cgroup) (Leader, *cgroup, error) {
	if spec.Launcher == nil {
		cmd, cg, err := startIn(commandMaker(path, spec, env, gate, out), cg)
		if err != nil {
			return nil, nil, err
		}
		return &execLeader{cmd: cmd, exited: procgroup.WaitExit(cmd.Process.Pid)}, cg, nil
	}
	req := Launch{Argv: spec.Argv, Env: env, Dir: spec.Dir, Stdout: out.stdout.fifo, Stderr: out.stderr.fifo}
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

// armGate makes the pipe of spec's gate, when it has one: the end the
// trial inherits and GateEnv's value for it. A launcher's trial has none.
func armGate(spec Spec) (*os.File, string, error) {
	switch {
	case spec.Gate == nil:
		return nil, "", nil
	case spec.Launcher != nil:
		return nil, "", errors.New("a gated trial cannot be started by a launcher")
	}
	r, id, err := spec.Gate.arm()
	if err != nil {
		return nil, "", fmt.Errorf("make the trial's gate: %w", err)
	}
	return r, id, nil
}

// awaitGate waits for the gated trial's gate (nil: none) to open, then starts its
// clock (Result.Start); or for its leader to exit first (it ended before it
// reached the GPU), or the context to end (Canceled, and the trial is
// killed at once: short of the GPU it has no work to save, and a program
// that handles SIGTERM would keep the search waiting its grace).
func awaitGate(ctx context.Context, g *Gate, tr *tracker, leader int, exited <-chan struct{}, res *Result) {
	if g == nil {
		return
	}
	select {
	case <-g.opened:
	case <-exited:
	case <-ctx.Done():
		res.Canceled = true
		stop(ctx, tr, leader, exited, 0, res)
	}
	if at, ok := g.openedAt(); ok && at.After(res.Start) {
		res.Start = at
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
