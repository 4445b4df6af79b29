// Package worker runs trials on a warm PyTorch worker (python -m
// batchfit.worker MODULE:ATTR): a process that builds the model once, runs
// one trial per request over a private pipe, and after every trial resets
// and verifies that allocated memory returned to its post-setup baseline.
// It also holds the recycle policy (a fresh worker after an OOM, a failed
// verification or a crash) as a search.Prober.
//
// The worker never gets the last word on the answer: re-checks and
// confirmations run in fresh processes, through a fallback Prober.
package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/procgroup"
	"github.com/batchfit/batchfit/internal/trial"
)

// Defaults for the zero values of Options.
const (
	DefaultStartTimeout = 10 * time.Minute
	DefaultGrace        = 5 * time.Second
	DefaultTailBytes    = 16 << 10
)

// maxLine bounds one message; a reply holds at most a 64 KiB traceback.
const maxLine = 16 << 20

// Options say how to run a worker.
type Options struct {
	Dir string // working directory; "" means batchfit's
	// StdoutPath and StderrPath are the worker's log files (the Trial's own
	// output goes there). "" uses a temporary file, removed by Close.
	StdoutPath, StderrPath string
	// StartTimeout bounds the time to the worker's hello: importing torch,
	// building the model, the warm-up. 0 means DefaultStartTimeout.
	StartTimeout time.Duration
	// Grace is how long Close waits for the worker to exit on its own before
	// it kills it. 0 means DefaultGrace.
	Grace time.Duration
	// TailBytes is how much of stderr a crashed trial's Result keeps.
	TailBytes int
	// OOMKills, when set, is read around each trial: a worker that the
	// kernel's OOM killer took counts as host_oom only with this evidence.
	OOMKills trial.OOMCounter
}

// Result is one trial on a worker.
type Result struct {
	ID      int              `json:"id"`
	Size    int              `json:"batch_size"`
	Steps   int              `json:"steps"`
	Outcome classify.Outcome `json:"outcome"`
	Reason  string           `json:"reason,omitempty"`
	// Exception is "Type: first line" of the step's exception; Traceback is
	// kept for errors other than out-of-memory.
	Exception     string    `json:"exception,omitempty"`
	Traceback     string    `json:"traceback,omitempty"`
	PeakAllocated uint64    `json:"peak_allocated_bytes"`
	PeakReserved  uint64    `json:"peak_reserved_bytes"`
	StepSeconds   []float64 `json:"step_seconds,omitempty"`
	// RetainedBytes is what the reset could not free: allocated memory after
	// the reset less the baseline (or, without CUDA, live tensor bytes less
	// the baseline's). Negative when the Trial freed something of its setup.
	RetainedBytes  int64  `json:"retained_bytes"`
	AllocatedAfter uint64 `json:"allocated_after_bytes"`
	ReservedAfter  uint64 `json:"reserved_after_bytes"`
	// Verified is true when memory returned exactly to the baseline; a
	// worker that fails verification must not run another trial.
	Verified   bool   `json:"verified"`
	ResetError string `json:"reset_error,omitempty"`
	// OptimizerStateCreated is set when the optimizers' state grew during
	// the trial (it should have been made by the warm-up).
	OptimizerStateCreated bool     `json:"optimizer_state_created,omitempty"`
	OptimizerStateBytes   uint64   `json:"optimizer_state_bytes,omitempty"`
	RetainedTensors       []Tensor `json:"retained_tensors,omitempty"`
	// OOMRequest is the refused allocation of an out-of-memory trial, as
	// torch's OOM observer saw it; nil when none was seen.
	OOMRequest *adapter.OOMRequest `json:"oom_request,omitempty"`

	Seconds   float64 `json:"seconds"`
	WorkerPID int     `json:"worker_pid"`
	// WorkerGone is set when the worker is dead after this trial: it died,
	// or batchfit killed it (timeout, cancel, a protocol error).
	WorkerGone bool   `json:"worker_gone,omitempty"`
	Tail       string `json:"stderr_tail,omitempty"` // for crashes and timeouts
}

// ErrClosed is returned by Trial on a worker that is dead or closed.
var ErrClosed = errors.New("worker is closed")

// StartError means the worker did not become ready.
type StartError struct {
	// Stage is where it failed: "start" (the command did not run),
	// "setup" or "warmup" (the Trial raised: Exception and Traceback say
	// what), "hello" (it exited, hung or spoke nonsense before its hello).
	Stage     string
	Outcome   classify.Outcome // a failed warm-up's: oom means even the warm-up size does not fit
	Exception string
	Traceback string
	Status    string // how the process ended, when it did
	Tail      string // the end of its stderr
	Err       error
}

func (e *StartError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start worker: %s failed", e.Stage)
	switch {
	case e.Exception != "":
		fmt.Fprintf(&b, ": %s", e.Exception)
	case e.Err != nil:
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Status != "" {
		fmt.Fprintf(&b, " (%s)", e.Status)
	}
	return b.String()
}

func (e *StartError) Unwrap() error { return e.Err }

// Worker is a running worker process. Trial may be called from one
// goroutine at a time (calls are serialized); Close from any.
type Worker struct {
	pid   int
	hello Hello
	opts  Options

	cmd    *exec.Cmd
	toW    *os.File // requests
	fromW  *os.File // replies
	msgs   chan inbound
	done   chan struct{} // closed by Close: the reader stops
	exited chan struct{} // closed once the leader is reaped and its group killed
	status string        // how it ended; valid after exited

	procMu sync.Mutex
	reaped bool

	mu        sync.Mutex // one trial at a time
	seq       int
	gone      atomic.Bool
	closeOnce sync.Once
	temp      []string
	stdout    string
	stderr    string
	mark      int64 // stderr log offset where the current trial began
	exitCode  int
	signal    syscall.Signal
}

type inbound struct {
	msg message
	err error
}

// Start runs argv as a worker in its own process group with env (nil means
// os.Environ()) plus the channel's descriptors, and waits for its hello.
// On any failure the process group is gone when Start returns.
func Start(ctx context.Context, argv []string, env []string, opts Options) (*Worker, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, &StartError{Stage: "start", Err: errors.New("empty command")}
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.TailBytes <= 0 {
		opts.TailBytes = DefaultTailBytes
	}
	if env == nil {
		env = os.Environ()
	}
	w := &Worker{opts: opts, msgs: make(chan inbound, 16), done: make(chan struct{}), exited: make(chan struct{})}
	stdout, err := w.openLog(opts.StdoutPath, "stdout")
	if err != nil {
		return nil, &StartError{Stage: "start", Err: fmt.Errorf("create log: %w", err)}
	}
	defer stdout.Close()
	stderr, err := w.openLog(opts.StderrPath, "stderr")
	if err != nil {
		w.removeTemp()
		return nil, &StartError{Stage: "start", Err: fmt.Errorf("create log: %w", err)}
	}
	defer stderr.Close()
	w.stdout, w.stderr = stdout.Name(), stderr.Name()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(adapter.Without(env, FDsEnv), FDsEnv+"=3,4")
	cmd.Dir = opts.Dir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// One group for the worker and its children (data loader workers),
	// killable as a whole, that dies with batchfit; requests on its fd 3,
	// replies on its fd 4.
	reqW, repR, err := procgroup.StartPiped(cmd)
	if err != nil {
		w.removeTemp()
		return nil, &StartError{Stage: "start", Err: err}
	}
	w.cmd, w.pid, w.toW, w.fromW = cmd, cmd.Process.Pid, reqW, repR
	go w.wait()
	go w.read()

	if err := w.awaitHello(ctx); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func (w *Worker) awaitHello(ctx context.Context) error {
	timer := time.NewTimer(w.opts.StartTimeout)
	defer timer.Stop()
	fail := func(stage string, err error) *StartError {
		w.kill()
		return &StartError{Stage: stage, Err: err, Status: w.status, Tail: w.tail()}
	}
	for {
		select {
		case in, ok := <-w.msgs:
			switch {
			case !ok:
				// It closed the channel: it is on its way out (an import
				// error), or must be sent. Its own exit status says more
				// than a kill's.
				select {
				case <-w.exited:
				case <-time.After(w.opts.Grace):
				case <-ctx.Done():
				}
				return fail("hello", errors.New("the worker exited before it was ready"))
			case in.err != nil:
				return fail("hello", fmt.Errorf("bad message: %w", in.err))
			case in.msg.typ == "fatal":
				f := in.msg.fatal
				// It exits on its own after its last word; its status
				// is part of the story.
				select {
				case <-w.exited:
				case <-time.After(w.opts.Grace):
				}
				w.kill()
				stage := f.Stage
				if stage == "" {
					stage = "setup"
				}
				return &StartError{Stage: stage, Outcome: wireOutcome(f.Outcome), Exception: f.Exception,
					Traceback: f.Traceback, Status: w.status, Tail: w.tail()}
			case in.msg.typ != "hello":
				return fail("hello", fmt.Errorf("unexpected %q message before hello", in.msg.typ))
			case in.msg.hello.Version != ProtocolVersion:
				return fail("hello", fmt.Errorf("worker speaks protocol version %d, batchfit %d: the batchfit Python package and binary differ", in.msg.hello.Version, ProtocolVersion))
			}
			w.hello = *in.msg.hello
			if w.hello.PID == 0 {
				w.hello.PID = w.pid
			}
			return nil
		case <-w.exited:
			// Its last words may still be in the pipe.
			if in, ok := w.drain(); ok && in.msg.typ == "fatal" {
				f := in.msg.fatal
				return &StartError{Stage: f.Stage, Outcome: wireOutcome(f.Outcome), Exception: f.Exception,
					Traceback: f.Traceback, Status: w.status, Tail: w.tail()}
			}
			return &StartError{Stage: "hello", Err: errors.New("the worker exited before it was ready"), Status: w.status, Tail: w.tail()}
		case <-timer.C:
			return fail("hello", fmt.Errorf("no hello within %s", w.opts.StartTimeout))
		case <-ctx.Done():
			return fail("hello", ctx.Err())
		}
	}
}

// Hello is the worker's hello.
func (w *Worker) Hello() Hello { return w.hello }

// PID is the worker's process id (also its process group id).
func (w *Worker) PID() int { return w.pid }

// Logs are the paths of the worker's stdout and stderr logs.
func (w *Worker) Logs() (stdout, stderr string) { return w.stdout, w.stderr }

// Alive reports whether the worker can still run trials.
func (w *Worker) Alive() bool { return !w.gone.Load() }

// Trial runs steps training steps at size on the worker and returns the
// classified result. Whatever goes wrong with the worker (no reply within
// timeout, a malformed reply, death) is a Result, not an error: the worker
// is killed and the trial is a timeout or a crash with the worker's stderr
// tail. The error is ErrClosed when the worker was already gone. A timeout
// of 0 means none.
func (w *Worker) Trial(ctx context.Context, size, steps int, timeout time.Duration) (Result, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone.Load() {
		return Result{}, ErrClosed
	}
	w.seq++
	res := Result{ID: w.seq, Size: size, Steps: steps, WorkerPID: w.pid}
	start := time.Now()
	w.markLog()
	if ctx.Err() != nil {
		res.Outcome, res.Reason = classify.Canceled, "canceled"
		return res, nil
	}
	var oomBefore uint64
	var oomOK bool
	if w.opts.OOMKills != nil {
		oomBefore, oomOK = w.opts.OOMKills.OOMKills()
	}
	evidence := func() bool {
		if !oomOK {
			return false
		}
		after, ok := w.opts.OOMKills.OOMKills()
		return ok && after > oomBefore
	}
	finish := func(r Result) (Result, error) {
		r.Seconds = time.Since(start).Seconds()
		return r, nil
	}
	if err := w.send(request{Type: "trial", ID: res.ID, BatchSize: size, Steps: steps}); err != nil {
		return finish(w.died(res, evidence))
	}
	var timeoutC <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timeoutC = t.C
	}
	select {
	case in, ok := <-w.msgs:
		switch {
		case !ok:
			return finish(w.died(res, evidence))
		case in.err != nil:
			return finish(w.broken(res, in.err.Error()))
		case in.msg.typ == "result" && in.msg.reply.ID == res.ID:
			w.fill(&res, in.msg.reply)
			return finish(res)
		case in.msg.typ == "result":
			return finish(w.broken(res, fmt.Sprintf("a result for trial %d while trial %d runs", in.msg.reply.ID, res.ID)))
		case in.msg.typ == "error":
			return finish(w.broken(res, "the worker refused the trial: "+in.msg.err))
		default:
			return finish(w.broken(res, fmt.Sprintf("unexpected %q message during a trial", in.msg.typ)))
		}
	case <-w.exited:
		return finish(w.died(res, evidence))
	case <-timeoutC:
		w.kill()
		res.Outcome = classify.Timeout
		res.Reason = fmt.Sprintf("no result within %s; the worker was killed", timeout)
		res.WorkerGone = true
		res.Tail = w.tail()
		return finish(res)
	case <-ctx.Done():
		w.kill()
		res.Outcome, res.Reason = classify.Canceled, "canceled; the worker was killed"
		res.WorkerGone = true
		return finish(res)
	}
}

// fill copies a worker's result into res and classifies it.
func (w *Worker) fill(res *Result, r *reply) {
	res.Exception = r.Exception
	res.Traceback = r.Traceback
	res.PeakAllocated, res.PeakReserved = r.PeakAllocated, r.PeakReserved
	res.StepSeconds = r.StepSeconds
	res.RetainedBytes = r.RetainedBytes
	res.AllocatedAfter, res.ReservedAfter = r.AllocatedAfter, r.ReservedAfter
	res.Verified = *r.Verified
	res.ResetError = r.ResetError
	res.OptimizerStateCreated = r.OptimizerStateCreated
	res.OptimizerStateBytes = r.OptimizerStateBytes
	res.RetainedTensors = r.RetainedTensors
	res.OOMRequest = r.OOMRequest
	switch r.Outcome {
	case "ok":
		res.Outcome, res.Reason = classify.OK, "ok"
	case "oom":
		res.Outcome, res.Reason = classify.OOM, firstLine(r.Exception)
		if res.Reason == "" {
			res.Reason = "out of memory"
		}
	default:
		// The step raised something else: the classifier knows which
		// errors mean "too large" (size limits, host memory) and which a
		// broken program.
		text := r.Traceback
		if !strings.Contains(text, r.Exception) {
			text += "\n" + r.Exception
		}
		c := classify.Classify(classify.Input{ExitCode: 1, Output: []byte(text)})
		res.Outcome, res.Reason = c.Outcome, c.Reason
		if c.Outcome == classify.Crash && r.Exception != "" {
			res.Reason = firstLine(r.Exception)
		}
		if c.Outcome == classify.Crash {
			res.Tail = r.Traceback
		}
	}
}

// died finishes a trial whose worker went away: the group is killed, a
// result the worker managed to send is still used, and otherwise the exit
// status and output are classified.
func (w *Worker) died(res Result, evidence func() bool) Result {
	w.kill()
	res.WorkerGone = true
	if in, ok := w.drain(); ok && in.msg.typ == "result" && in.msg.reply.ID == res.ID {
		w.fill(&res, in.msg.reply)
		return res
	}
	res.Tail = w.tail()
	c := classify.Classify(classify.Input{
		ExitCode:        w.exitCode,
		Signal:          w.signal,
		HostOOMEvidence: evidence(),
		Output:          []byte(res.Tail),
		Matches:         trial.ScanLog(w.stderr, w.mark),
	})
	res.Outcome = c.Outcome
	if c.Outcome == classify.OK {
		res.Outcome = classify.Crash
	}
	res.Reason = "the worker died during the trial (" + w.status + ")"
	if c.Outcome != classify.OK && c.Reason != "" && c.Reason != w.status {
		res.Reason += ": " + c.Reason
	}
	return res
}

// broken finishes a trial whose worker said something it should not have.
func (w *Worker) broken(res Result, why string) Result {
	w.kill()
	res.WorkerGone = true
	res.Outcome = classify.Crash
	res.Reason = "worker protocol error: " + why
	res.Tail = w.tail()
	return res
}

// drain returns the next message already sent, waiting briefly for the
// reader to reach the end of the pipe after the worker exited.
func (w *Worker) drain() (inbound, bool) {
	select {
	case in, ok := <-w.msgs:
		return in, ok && in.err == nil
	case <-time.After(2 * time.Second):
		// A descendant outside the group still holds the pipe open.
		return inbound{}, false
	}
}

func (w *Worker) send(r request) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.toW.Write(append(b, '\n'))
	return err
}

// read turns the worker's lines into messages until the pipe ends or the
// worker is closed.
func (w *Worker) read() {
	defer close(w.msgs)
	sc := bufio.NewScanner(w.fromW)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		m, err := parseMessage(line)
		if err != nil {
			err = fmt.Errorf("%w: %q", err, clip(line, 200))
		}
		select {
		case w.msgs <- inbound{msg: m, err: err}:
		case <-w.done:
			return
		}
		if err != nil {
			return
		}
	}
	if err := sc.Err(); err != nil {
		select {
		case w.msgs <- inbound{err: fmt.Errorf("read the worker's channel: %w", err)}:
		case <-w.done:
		}
	}
}

// wait notices the leader's exit, kills what is left of its group while the
// zombie keeps the group id reserved, then reaps it.
func (w *Worker) wait() {
	<-procgroup.WaitExit(w.pid)
	w.procMu.Lock()
	killGroup(w.pid)
	_ = w.cmd.Wait()
	w.reaped = true
	w.procMu.Unlock()
	procgroup.ReapGroup(w.pid)
	w.exitCode = -1
	if ps := w.cmd.ProcessState; ps != nil {
		ws, _ := ps.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			w.signal = ws.Signal()
			name := unix.SignalName(w.signal)
			if name == "" {
				name = w.signal.String()
			}
			w.status = "killed by " + name
		default:
			w.exitCode = ws.ExitStatus()
			w.status = fmt.Sprintf("exit status %d", w.exitCode)
		}
	}
	w.gone.Store(true)
	close(w.exited)
}

// kill kills the worker's group and waits until the leader is reaped.
func (w *Worker) kill() {
	w.gone.Store(true)
	w.procMu.Lock()
	if !w.reaped {
		killGroup(w.pid)
	}
	w.procMu.Unlock()
	<-w.exited
}

// Close asks the worker to exit, kills its group if it has not within the
// grace period, and releases everything. It is safe to call more than once.
func (w *Worker) Close() error {
	w.closeOnce.Do(func() {
		if !w.gone.Load() {
			if w.send(request{Type: "exit"}) == nil {
				select {
				case <-w.exited:
				case <-time.After(w.opts.Grace):
				}
			}
		}
		w.kill()
		close(w.done)
		w.toW.Close()
		w.fromW.Close()
		w.removeTemp()
	})
	return nil
}

// tail is the end of the worker's stderr since the current trial began
// (since the start outside a trial): earlier trials' errors in the log
// must not explain this one.
func (w *Worker) tail() string {
	return string(trial.ReadTail(w.stderr, w.mark, w.opts.TailBytes))
}

// markLog notes where the stderr log ends now.
func (w *Worker) markLog() {
	if fi, err := os.Stat(w.stderr); err == nil {
		w.mark = fi.Size()
	}
}

func (w *Worker) openLog(path, stream string) (*os.File, error) {
	f, temp, err := trial.OpenLog(path, "batchfit-worker-"+stream+"-*")
	if temp {
		w.temp = append(w.temp, f.Name())
	}
	return f, err
}

func (w *Worker) removeTemp() {
	for _, p := range w.temp {
		os.Remove(p)
	}
	w.temp = nil
}

func wireOutcome(s string) classify.Outcome {
	switch s {
	case "ok":
		return classify.OK
	case "oom":
		return classify.OOM
	case "error":
		return classify.Crash
	}
	return ""
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
