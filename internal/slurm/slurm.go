// Package slurm runs batchfit's trials as Slurm batch jobs: one job a
// trial, submitted with sbatch, followed with squeue and scontrol (or sacct),
// and cancelled with scancel when the trial times out or the user stops
// batchfit. The trial's outcome then comes, as for a local trial, from its
// own exit status and output, which the job writes to the trial's log files
// on a filesystem the compute nodes share.
package slurm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/trial"
)

// Defaults for the zero values of Options.
const (
	DefaultPoll    = 2 * time.Second
	DefaultJobName = "batchfit"
)

// maxReruns is how many times a trial whose job was preempted or lost its
// node is submitted again before batchfit gives up.
const maxReruns = 2

// Options say how trials are submitted.
type Options struct {
	// Passed to sbatch when set.
	Partition, Account, Constraint, QOS string
	// Time is sbatch's --time, verbatim. Empty: the trial's timeout plus its
	// grace period, rounded up to minutes, plus a minute (batchfit's own
	// timer ends the trial first); no --time when the trial has no timeout.
	Time string
	// GPUsPerTrial asks for that many GPUs a job (--gres=gpu:N); the job
	// then sees the GPUs Slurm gave it, not the trial environment's
	// CUDA_VISIBLE_DEVICES. 0 asks for none.
	GPUsPerTrial int
	// ExtraArgs are passed to sbatch as they are, after batchfit's own
	// options, so they win over them (--output and --error must stay).
	ExtraArgs []string
	// Poll is how often batchfit asks Slurm about a job; 0 means
	// DefaultPoll.
	Poll time.Duration
	// JobName starts the name of every job, which a random part makes
	// unique to its trial; "" means DefaultJobName.
	JobName string
	// Commands runs Slurm's programs; nil runs the real ones (Exec).
	Commands Commands
}

// Executor runs trials as Slurm jobs. It implements probe.Executor and is
// safe for concurrent use: each trial is its own job.
type Executor struct {
	opts Options
	cmds Commands

	// Bounds on waiting for Slurm; tests shorten them.
	cmdTimeout time.Duration // one client command
	queryGrace time.Duration // how long the job's state may stay unknown
	stopWait   time.Duration // how long a cancelled job may take to leave the queue
	killWait   time.Duration // how long a job sent SIGKILL may take to leave it before it is cancelled
}

// New checks opts and returns an Executor. With the real commands, sbatch
// must be on PATH.
func New(opts Options) (*Executor, error) {
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.JobName == "" {
		opts.JobName = DefaultJobName
	}
	if opts.GPUsPerTrial < 0 {
		return nil, &Error{Op: "check options", Err: fmt.Errorf("GPUs per trial %d: must not be negative", opts.GPUsPerTrial)}
	}
	for _, a := range append([]string{opts.Partition, opts.Account, opts.Constraint, opts.QOS, opts.Time, opts.JobName}, opts.ExtraArgs...) {
		if strings.ContainsAny(a, "\n\x00") {
			return nil, &Error{Op: "check options", Err: fmt.Errorf("sbatch argument %q holds a newline or NUL", a)}
		}
	}
	if opts.Commands == nil {
		opts.Commands = Exec{}
	}
	if _, real := opts.Commands.(Exec); real {
		if _, err := exec.LookPath("sbatch"); err != nil {
			return nil, &Error{Op: "find sbatch", Err: err,
				hint: "the Slurm executor submits trials with sbatch: run batchfit where Slurm's commands are installed (a login node), or put them on PATH"}
		}
	}
	return &Executor{
		opts:       opts,
		cmds:       opts.Commands,
		cmdTimeout: time.Minute,
		queryGrace: 2 * time.Minute,
		stopWait:   time.Minute,
		killWait:   5 * time.Second,
	}, nil
}

// Error is a failure of Slurm or the cluster rather than of the trial: the
// job could not be submitted, followed, or it ended in a way that says
// nothing about the trial (preempted, node failure, cancelled by someone
// else). Hint says what to do about it.
type Error struct {
	Op     string // what batchfit was doing
	JobID  string // "" before the job was submitted
	State  string // the job's final state, when that is the problem
	Stderr string // what the Slurm command said
	Err    error
	hint   string
}

func (e *Error) Error() string {
	msg := "slurm: " + e.Op
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Hint suggests a fix, for the CLI to print after the error.
func (e *Error) Hint() string { return e.hint }

// job is one trial's submission.
type job struct {
	spec       trial.Spec
	name       string // the job's name, unique to the trial
	stdout     string // absolute log paths
	stderr     string
	scriptPath string
	args       []string // sbatch's arguments
	grace      time.Duration
}

// Run runs spec as a Slurm job and waits for its end. The error is an
// *Error (or a *trial.StartError for a spec that cannot run at all) and
// means the trial says nothing about the batch size; everything the trial
// itself did is in the Result. Canceling ctx cancels the job, waits until
// Slurm has ended it (bounded) and sets Canceled; a job running past
// spec.Timeout is cancelled the same way and TimedOut. The watcher is not
// used: the trial's processes are on another machine, and its GPU memory
// comes from the adapter's report.
func (e *Executor) Run(ctx context.Context, spec trial.Spec, _ trial.Watcher) (trial.Result, error) {
	j, err := e.prepare(spec)
	if err != nil {
		return trial.Result{}, err
	}
	for reruns := 0; ; reruns++ {
		if ctx.Err() != nil {
			return trial.Result{Canceled: true, ExitCode: -1}, nil
		}
		res, end, id, err := e.runJob(ctx, j)
		if err != nil || res.Canceled || res.TimedOut || !rerun(end.State) {
			return res, err
		}
		if reruns == maxReruns {
			return res, &Error{Op: fmt.Sprintf("job %s", id), JobID: id, State: end.State,
				Err:  fmt.Errorf("ended %s %d times in a row; the trial never ran to its end", end.State, reruns+1),
				hint: rerunHint(end.State)}
		}
	}
}

func rerunHint(state string) string {
	if state == "PREEMPTED" {
		return "other jobs preempt batchfit's: pick a partition or QOS without preemption (--partition, --qos)"
	}
	return "the trial's node failed under it; see `sinfo -R` for why, and exclude that node (--sbatch-arg=--exclude=NODE)"
}

// prepare writes the trial's batch script and builds sbatch's arguments.
func (e *Executor) prepare(spec trial.Spec) (*job, error) {
	argv0 := ""
	if len(spec.Argv) > 0 {
		argv0 = spec.Argv[0]
	}
	if argv0 == "" {
		return nil, &trial.StartError{Op: "find command", Err: errors.New("empty command")}
	}
	if spec.StdoutPath == "" || spec.StderrPath == "" {
		return nil, &trial.StartError{Op: "create log", Argv0: argv0,
			Err: errors.New("a Slurm trial needs stdout and stderr log paths (on a filesystem the compute nodes share)")}
	}
	j := &job{spec: spec, grace: spec.Grace}
	if j.grace <= 0 {
		j.grace = trial.DefaultGrace
	}
	var err error
	if j.stdout, err = filepath.Abs(spec.StdoutPath); err != nil {
		return nil, &trial.StartError{Op: "create log", Argv0: argv0, Err: err}
	}
	if j.stderr, err = filepath.Abs(spec.StderrPath); err != nil {
		return nil, &trial.StartError{Op: "create log", Argv0: argv0, Err: err}
	}
	for _, p := range []string{j.stdout, j.stderr} {
		if strings.ContainsAny(p, "\n\x00") {
			return nil, &trial.StartError{Op: "create log", Argv0: argv0, Err: fmt.Errorf("log path %q holds a newline", p)}
		}
		// The job creates the files on its node; the directory must be
		// there already, and this is the same filesystem.
		if fi, err := os.Stat(filepath.Dir(p)); err != nil || !fi.IsDir() {
			if err == nil {
				err = fmt.Errorf("%s: %w", filepath.Dir(p), syscall.ENOTDIR)
			}
			return nil, &trial.StartError{Op: "create log", Argv0: argv0, Err: err}
		}
	}
	dir := spec.Dir
	if dir == "" {
		// A local trial runs in batchfit's directory; so does this one.
		if dir, err = os.Getwd(); err != nil {
			return nil, &trial.StartError{Op: "check working directory", Argv0: argv0, Err: err}
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, &trial.StartError{Op: "check working directory", Argv0: argv0, Err: err}
	}
	env := spec.Env
	if env == nil {
		env = os.Environ()
	}

	base := strings.TrimSuffix(j.stdout, filepath.Ext(j.stdout))
	j.scriptPath = base + ".sbatch"
	j.name = e.opts.JobName + "-" + nameToken()
	j.args = e.sbatchArgs(spec, j.name, dir, j.stdout, j.stderr)
	s := script{argv: spec.Argv, env: env, dir: dir, gpus: e.opts.GPUsPerTrial > 0, sbatch: slices.Concat([]string{"sbatch"}, j.args, []string{j.scriptPath})}
	text, err := s.text()
	if err != nil {
		return nil, &trial.StartError{Op: "find command", Argv0: argv0, Err: err}
	}
	if err := os.WriteFile(j.scriptPath, []byte(text), 0o644); err != nil {
		return nil, &trial.StartError{Op: "create log", Argv0: argv0, Err: fmt.Errorf("write the batch script: %w", err)}
	}
	return j, nil
}

// nameToken is the random part of a job's name: 48 bits, so that no two
// trials' jobs share a name.
func nameToken() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
	return hex.EncodeToString(b[:])
}

// sbatchArgs are the job's options, all on the command line: there they
// win over SBATCH_* variables in batchfit's environment, which would win
// over #SBATCH lines in the script.
func (e *Executor) sbatchArgs(spec trial.Spec, name, dir, stdout, stderr string) []string {
	o := e.opts
	args := []string{
		"--parsable",
		"--job-name=" + name,
		// ALL: the script sets the trial's environment itself, and any other
		// mode makes Slurm load the user's login environment on the node
		// (su -), which costs seconds a trial.
		"--export=ALL",
		"--chdir=" + dir,
		"--output=" + filePattern(stdout),
		"--open-mode=truncate",
	}
	if stderr != stdout {
		args = append(args, "--error="+filePattern(stderr))
	}
	switch {
	case o.Time != "":
		args = append(args, "--time="+o.Time)
	case spec.Timeout > 0:
		args = append(args, "--time="+strconv.Itoa(timeLimitMinutes(spec.Timeout, spec.Grace)))
	}
	if o.GPUsPerTrial > 0 {
		args = append(args, "--gres=gpu:"+strconv.Itoa(o.GPUsPerTrial))
	}
	for _, f := range []struct{ flag, v string }{
		{"--partition", o.Partition}, {"--account", o.Account}, {"--constraint", o.Constraint}, {"--qos", o.QOS},
	} {
		if f.v != "" {
			args = append(args, f.flag+"="+f.v)
		}
	}
	args = append(args, o.ExtraArgs...)
	return args
}

// timeLimitMinutes is the job's time limit for a trial timeout: batchfit's
// own timer (started when the job starts running) cancels it first, so
// Slurm's limit only ends a job that batchfit lost track of.
func timeLimitMinutes(timeout, grace time.Duration) int {
	if grace <= 0 {
		grace = trial.DefaultGrace
	}
	d := timeout + grace
	return int((d+time.Minute-1)/time.Minute) + 1
}

// filePattern escapes a path for sbatch's --output and --error, which
// expand %j and the like: %% is a literal %.
func filePattern(p string) string { return strings.ReplaceAll(p, "%", "%%") }

// runJob submits j once and follows the job to its end. It returns the
// job's end state too, for the caller to decide on a rerun. The spec's
// OnSubmit hears of the job before sbatch runs, and is told it is done
// only when the job is sure to have left the queue.
func (e *Executor) runJob(ctx context.Context, j *job) (trial.Result, jobEnd, string, error) {
	recorded, done := func(string) {}, func() {}
	if j.spec.OnSubmit != nil {
		r, d := j.spec.OnSubmit(j.name)
		if r != nil {
			recorded = r
		}
		if d != nil {
			done = d
		}
	}
	submitted := time.Now()
	id, unsure, err := e.submit(ctx, j)
	if err != nil {
		if !unsure {
			done()
		}
		return trial.Result{}, jobEnd{}, "", err
	}
	recorded(id)
	// From here on the job exists: every way out of this function leaves it
	// ended, or says it may not be (errStillQueued).
	f, err := e.follow(ctx, j, id)
	if !errors.Is(err, errStillQueued) {
		done()
	}
	res := f.res
	if err != nil {
		return res, jobEnd{}, id, err
	}
	end, err := e.end(ctx, id)
	if err != nil {
		if !res.Canceled && !res.TimedOut {
			return res, end, id, err
		}
		// batchfit ended the job and knows why; Slurm's exit status and
		// times would only add detail.
		end = jobEnd{ExitCode: -1}
	}
	res.Start, res.Duration = f.span(end, submitted)
	if err := applyEnd(&res, end, id); err != nil {
		return res, end, id, err
	}
	readLogs(j, &res)
	return res, end, id, nil
}

// followed is what following a job to its end saw: the result so far
// (canceled, timed out), when the job started running (zero if it never
// did) and when batchfit saw it gone.
type followed struct {
	res          trial.Result
	runningSince time.Time
	gone         time.Time
}

// span is the trial's start and duration: Slurm's, or what batchfit saw
// when Slurm's times are missing.
func (f followed) span(end jobEnd, submitted time.Time) (time.Time, time.Duration) {
	if !end.Start.IsZero() && !end.End.Before(end.Start) {
		return end.Start, end.End.Sub(end.Start)
	}
	if !f.runningSince.IsZero() {
		return f.runningSince, f.gone.Sub(f.runningSince)
	}
	return submitted, f.gone.Sub(submitted)
}

// follow polls job id until it ends, stopping it when ctx is done or it has
// run for j's timeout (which starts when it runs, again after a requeue).
func (e *Executor) follow(ctx context.Context, j *job, id string) (followed, error) {
	var f followed
	var timeout <-chan time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	tick := time.NewTicker(e.opts.Poll)
	defer tick.Stop()
	var failingSince time.Time
	for {
		select {
		case <-ctx.Done():
			f.res.Canceled = true
			err := e.stop(ctx, id, !f.runningSince.IsZero(), j.grace, nil)
			f.gone = time.Now()
			return f, err
		case <-timeout:
			f.res.TimedOut = true
			err := e.stop(ctx, id, true, j.grace, ctx.Done())
			f.res.Canceled = ctx.Err() != nil
			f.gone = time.Now()
			return f, err
		case <-tick.C:
		}
		st, err := e.queueState(ctx, id)
		if err != nil {
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(failingSince) < e.queryGrace {
				continue
			}
			serr := e.stop(ctx, id, true, 0, nil)
			return f, &Error{Op: "follow job " + id, JobID: id, Err: errors.Join(err, serr),
				hint: fmt.Sprintf("Slurm did not say how job %s is doing for %s; batchfit cancelled it", id, e.queryGrace)}
		}
		failingSince = time.Time{}
		switch phaseOf(st) {
		case finished:
			f.gone = time.Now()
			return f, nil
		case running:
			if f.runningSince.IsZero() {
				f.runningSince = time.Now()
				if j.spec.Timeout > 0 {
					timer = time.NewTimer(j.spec.Timeout)
					timeout = timer.C
				}
			}
		case waiting:
			// Requeued (or not started yet): its time starts when it runs.
			if !f.runningSince.IsZero() && timer != nil {
				timer.Stop()
			}
			f.runningSince, timeout = time.Time{}, nil
		}
	}
}

// applyEnd sets res's exit status from Slurm's end of the job, and returns
// an error for the ends that say the trial did not run to its end for a
// reason of its own (cancelled by someone else, a deadline).
func applyEnd(res *trial.Result, end jobEnd, id string) error {
	res.ExitCode = end.ExitCode
	if end.Signal != 0 {
		res.ExitCode = -1
		res.Signal = syscall.Signal(end.Signal)
	}
	if res.Canceled || res.TimedOut {
		return nil
	}
	switch end.State {
	case "TIMEOUT":
		res.TimedOut = true
	case "OUT_OF_MEMORY":
		// The job's cgroup recorded an OOM kill. Slurm reports the kill as
		// a made-up signal number; the process got SIGKILL.
		res.HostOOMEvidence = true
		if end.Signal > 64 || (end.Signal == 0 && end.ExitCode == 0) {
			res.ExitCode, res.Signal = -1, syscall.SIGKILL
		}
	case "CANCELLED":
		return &Error{Op: "job " + id, JobID: id, State: end.State,
			Err:  errors.New("cancelled, but not by batchfit"),
			hint: fmt.Sprintf("someone or something else (scancel, an administrator, a dependency) cancelled job %s; see `scontrol show job %s`", id, id)}
	case "DEADLINE", "REVOKED", "SPECIAL_EXIT":
		return &Error{Op: "job " + id, JobID: id, State: end.State,
			Err:  fmt.Errorf("ended %s, so the trial did not run to its end", end.State),
			hint: fmt.Sprintf("see `scontrol show job %s` for why", id)}
	}
	return nil
}

// readLogs fills in the tails of the job's output and what the whole logs
// say (every error text, not only the tails').
func readLogs(j *job, res *trial.Result) {
	tail := j.spec.TailBytes
	if tail <= 0 {
		tail = trial.DefaultTailBytes
	}
	res.StdoutTail = trial.ReadTail(j.stdout, 0, tail)
	res.StderrTail = trial.ReadTail(j.stderr, 0, tail)
	res.Matches = trial.ScanLog(j.stderr, 0)
	if j.stdout != j.stderr {
		res.Matches = classify.Merge(res.Matches, trial.ScanLog(j.stdout, 0))
	}
}

// submit runs sbatch. It is not canceled with ctx: a killed sbatch may
// have queued a job whose ID batchfit would never learn. The caller cancels
// the job once it has the ID. unsure, with an error, says a job may have
// been queued all the same: sbatch ran past its time, or exited 0 without
// an ID.
func (e *Executor) submit(ctx context.Context, j *job) (id string, unsure bool, err error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cmdTimeout)
	defer cancel()
	stdout, stderr, err := e.cmds.Run(cctx, "sbatch", append(slices.Clip(j.args), j.scriptPath)...)
	if err != nil {
		msg := oneLine(stderr)
		return "", cctx.Err() != nil, &Error{Op: "submit the trial (sbatch)", Err: err, Stderr: msg, hint: submitHint(msg)}
	}
	// --parsable prints "ID" or "ID;cluster".
	id, _, _ = strings.Cut(strings.TrimSpace(string(stdout)), ";")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", true, &Error{Op: "submit the trial (sbatch)", Err: fmt.Errorf("no job ID in sbatch's output %q", shorten(string(stdout))), Stderr: oneLine(stderr)}
	}
	return id, false, nil
}

func submitHint(stderr string) string {
	s := strings.ToLower(stderr)
	switch {
	case strings.Contains(s, "account") || strings.Contains(s, "association"):
		return "list your accounts with `sacctmgr show assoc user=$USER format=account,partition,qos`, and pick one with --account"
	case strings.Contains(s, "partition"):
		return "list the partitions you may use with `sinfo -s`, and pick one with --partition"
	case strings.Contains(s, "qos"):
		return "list your QOS with `sacctmgr show assoc user=$USER format=account,qos`, and pick one with --qos"
	case strings.Contains(s, "node configuration is not available") || strings.Contains(s, "gres") || strings.Contains(s, "feature"):
		return "no node offers what the job asks for (GPUs, --constraint, memory); compare with `sinfo -o '%P %G %f %m %l'`"
	case strings.Contains(s, "time limit"):
		return "the trial's time limit is above the partition's; lower --timeout, or set --time"
	}
	return "sbatch refused the trial's job; check --partition, --account, --qos, --constraint, --gpus-per-trial and --sbatch-arg"
}

// queueState asks squeue for the job's state. A job no longer in the queue
// counts as finished; scontrol or sacct then say how it ended.
func (e *Executor) queueState(ctx context.Context, id string) (string, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cmdTimeout)
	defer cancel()
	stdout, stderr, err := e.cmds.Run(cctx, "squeue", "-h", "-j", id, "-o", "%T")
	if err != nil {
		if unknownJob(stderr) {
			return "COMPLETED", nil
		}
		return "", &Error{Op: "ask squeue about job " + id, JobID: id, Err: err, Stderr: oneLine(stderr)}
	}
	st := strings.TrimSpace(string(stdout))
	if st == "" {
		return "COMPLETED", nil
	}
	st, _, _ = strings.Cut(st, "\n")
	return strings.TrimSpace(st), nil
}

// unknownJob reports whether a Slurm command said the job is not (or no
// longer) known to the controller.
func unknownJob(stderr []byte) bool {
	return bytes.Contains(bytes.ToLower(stderr), []byte("invalid job id"))
}

// end reads how the finished job ended: from scontrol, which keeps finished
// jobs for MinJobAge (5 minutes by default), else from sacct (accounting).
func (e *Executor) end(ctx context.Context, id string) (jobEnd, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cmdTimeout)
	defer cancel()
	// The job may still be settling (COMPLETING) right after it left
	// squeue's view; wait for a final state, a little.
	var end jobEnd
	var err error
	for try := 0; ; try++ {
		var stdout, stderr []byte
		stdout, stderr, err = e.cmds.Run(cctx, "scontrol", "-o", "show", "job", id)
		if err != nil {
			if !unknownJob(stderr) {
				err = &Error{Op: "ask scontrol about job " + id, JobID: id, Err: err, Stderr: oneLine(stderr)}
			}
			break
		}
		if end, err = parseScontrol(string(stdout)); err != nil {
			return end, &Error{Op: "read job " + id, JobID: id, Err: err}
		}
		if phaseOf(end.State) == finished {
			return end, nil
		}
		if try == 10 {
			return end, &Error{Op: "read job " + id, JobID: id, State: end.State, Err: fmt.Errorf("left the queue but is still %s", end.State)}
		}
		select {
		case <-time.After(e.opts.Poll):
		case <-cctx.Done():
			return end, &Error{Op: "read job " + id, JobID: id, Err: cctx.Err()}
		}
	}
	stdout, stderr, serr := e.cmds.Run(cctx, "sacct", "-n", "-P", "-X", "-j", id, "-o", "State,ExitCode,Start,End")
	if serr == nil {
		if end, serr = parseSacct(string(stdout)); serr == nil && phaseOf(end.State) == finished {
			return end, nil
		}
	}
	if serr != nil && len(stderr) > 0 {
		serr = fmt.Errorf("%w: %s", serr, oneLine(stderr))
	}
	return jobEnd{}, &Error{Op: "read how job " + id + " ended", JobID: id, Err: errors.Join(err, serr),
		hint: "neither scontrol (which forgets finished jobs after MinJobAge) nor sacct (accounting) knows the job; ask the administrators to raise MinJobAge or enable accounting"}
}

// stop ends the job. A running job gets SIGTERM (its whole batch script,
// which is the trial's command, and its children: --full), up to grace to
// exit, then SIGKILL; a job that is still there after that, or had not
// started, is cancelled. urgent, when closed, cuts the grace short. stop
// returns when the job has left the queue, or with an error when it has not
// after stopWait.
//
// scancel is left for last because a plain cancel makes slurmd wait at
// least 5 s (or KillWait) for the job's processes even when SIGKILL has
// already ended them.
func (e *Executor) stop(ctx context.Context, id string, running bool, grace time.Duration, urgent <-chan struct{}) error {
	bg := context.WithoutCancel(ctx)
	if running {
		if grace > 0 {
			e.scancel(bg, "--signal=TERM", "--full", id)
			if e.waitGone(bg, id, grace, urgent) {
				return nil
			}
		}
		e.scancel(bg, "--signal=KILL", "--full", id)
		if e.waitGone(bg, id, e.killWait, nil) {
			return nil
		}
	}
	e.scancel(bg, id)
	return e.awaitCancel(bg, id)
}

// errStillQueued means a job batchfit cancelled had not left the queue when
// batchfit gave up waiting.
var errStillQueued = errors.New("still in the queue")

// awaitCancel waits, up to stopWait, for the job just cancelled to leave
// the queue.
func (e *Executor) awaitCancel(ctx context.Context, id string) error {
	if !e.waitGone(ctx, id, e.stopWait, nil) {
		return &Error{Op: "cancel job " + id, JobID: id, Err: fmt.Errorf("%w %s after scancel", errStillQueued, e.stopWait),
			hint: fmt.Sprintf("check it with `squeue -j %s` and cancel it with `scancel %s`", id, id)}
	}
	return nil
}

// CancelLeft cancels the job a dead batchfit left: by its id when that
// batchfit had it, else by its name, which sbatch was given before it ran.
// It returns the ids of the jobs it cancelled, once they have left the
// queue; none when the job had ended, or was never queued. The caller must
// know the job's owner to be dead: a live batchfit follows its own jobs.
func (e *Executor) CancelLeft(ctx context.Context, name, id string) ([]string, error) {
	ctx = context.WithoutCancel(ctx)
	var ids []string
	if id != "" {
		st, err := e.queueState(ctx, id)
		if err != nil {
			return nil, err
		}
		if phaseOf(st) != finished {
			ids = []string{id}
		}
	} else {
		cctx, cancel := context.WithTimeout(ctx, e.cmdTimeout)
		stdout, stderr, err := e.cmds.Run(cctx, "squeue", "-h", "--name="+name, "-o", "%i")
		cancel()
		if err != nil {
			return nil, &Error{Op: "ask squeue about jobs named " + name, Err: err, Stderr: oneLine(stderr)}
		}
		ids = strings.Fields(string(stdout))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	e.scancel(ctx, ids...)
	var gone []string
	var errs []error
	for _, id := range ids {
		if err := e.awaitCancel(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		gone = append(gone, id)
	}
	return gone, errors.Join(errs...)
}

// scancel runs scancel; its errors (the job already ended, most often) are
// left to waitGone to judge.
func (e *Executor) scancel(ctx context.Context, args ...string) {
	cctx, cancel := context.WithTimeout(ctx, e.cmdTimeout)
	defer cancel()
	_, _, _ = e.cmds.Run(cctx, "scancel", args...)
}

// waitGone polls until the job has left the queue (true), limit has passed
// or urgent is closed (false).
func (e *Executor) waitGone(ctx context.Context, id string, limit time.Duration, urgent <-chan struct{}) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	poll := min(e.opts.Poll, 200*time.Millisecond)
	for {
		if st, err := e.queueState(ctx, id); err == nil && phaseOf(st) == finished {
			return true
		}
		select {
		case <-deadline.C:
			return false
		case <-urgent:
			return false
		case <-time.After(poll):
		}
	}
}

// oneLine joins a command's stderr into one line for an error message.
func oneLine(b []byte) string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}
