package forkserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/procgroup"
	"github.com/batchfit/batchfit/internal/trial"
)

// errServer marks a failure of the server itself (it died, refused to fork,
// the channel broke), after which a trial runs as a fresh process instead.
var errServer = errors.New("fork server")

// Dropped is a module the server did not preload, and why.
type Dropped struct {
	Module string `json:"module"`
	Reason string `json:"reason"`
	// Unsafe says the module started a thread or a GPU runtime; otherwise
	// its import failed.
	Unsafe bool `json:"unsafe"`
}

// message is any line the server writes.
type message struct {
	Event    string    `json:"event"`
	PID      int       `json:"pid"`
	Error    string    `json:"error"`
	Hazard   *string   `json:"hazard"`
	Loaded   []string  `json:"loaded"`
	Dropped  []Dropped `json:"dropped"`
	Poisoned bool      `json:"poisoned"`
	Packages []string  `json:"packages"`
	Cgroup   bool      `json:"cgroup"`
	Code     int       `json:"code"`
	Signal   int       `json:"signal"`
}

// server is a running `python -m batchfit.forkserver` and the client side of
// its channel. It is a trial.Launcher: each Launch forks one child.
//
// The process batchfit started (cmd) may hand over to a backup of itself
// while it preloads, and exit: the server is then another process of the
// same group. So the server's life is its reply channel, which ends only
// once every process that holds it has exited, and it is killed by its
// group, never by cmd's pid alone.
type server struct {
	cmd  *exec.Cmd
	req  *os.File
	pgid int           // the group of cmd's process, which every server process stays in
	done chan struct{} // closed when the reply channel ends (the server died or exited)

	// Launches are one at a time: a request and its reply are a pair.
	launch  sync.Mutex
	replies chan message

	wmu sync.Mutex // one request line at a time on the channel

	mu       sync.Mutex
	pid      int // the server process now: cmd's, or the backup's that took over
	children map[int]*child
	early    map[int]message // exits that came before their launch's reply was handled
	orphaned map[int]bool    // children whose wait the server's death ended
	dead     bool
}

var _ trial.Launcher = (*server)(nil)

// startServer starts the server for k with env, its own output going to logPath ("" discards it), and waits for it to
// say it is ready.
func startServer(k key, env []string, logPath string, timeout time.Duration) (*server, error) {
	// A backup that takes over from the server is re-parented to batchfit,
	// which reaps it (close) and which it dies with.
	procgroup.BecomeSubreaper()
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if logPath != "" {
		out, err = os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	}
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(k.path, "-m", "batchfit.forkserver")
	cmd.Args[0] = k.argv0
	// The server's backups check for batchfit by its pid: the server's
	// parent may be a wrapper around the interpreter.
	cmd.Dir, cmd.Env = k.dir, append(slices.Clip(env), "BATCHFIT_FORKSERVER_PARENT="+strconv.Itoa(os.Getpid()))
	cmd.Stdout, cmd.Stderr = out, out
	reqW, repR, err := procgroup.StartPiped(cmd)
	out.Close()
	if err != nil {
		return nil, err
	}
	s := &server{
		cmd: cmd, req: reqW, pgid: cmd.Process.Pid, pid: cmd.Process.Pid,
		done: make(chan struct{}), replies: make(chan message, 1), children: map[int]*child{}, early: map[int]message{}, orphaned: map[int]bool{},
	}
	go s.read(repR)
	select {
	case m := <-s.replies:
		if m.Event != "ready" {
			s.close()
			return nil, fmt.Errorf("fork server said %q before it was ready", m.Event)
		}
		if m.Hazard != nil {
			s.close()
			return nil, fmt.Errorf("fork server unsafe to fork from at start: %s", *m.Hazard)
		}
		return s, nil
	case <-s.done:
		s.close()
		return nil, errors.New("fork server exited before it was ready (see its log)")
	case <-time.After(timeout):
		s.close()
		return nil, fmt.Errorf("fork server not ready after %s", timeout)
	}
}

// read dispatches the server's lines: exits to their children, the rest to
// whoever waits for a reply.
func (s *server) read(r *os.File) {
	defer r.Close()
	defer s.died()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var m message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Event != "exit" {
			s.replies <- m
			continue
		}
		s.mu.Lock()
		c := s.children[m.PID]
		if c == nil {
			s.early[m.PID] = m
		}
		s.mu.Unlock()
		if c != nil {
			c.exit(m.Code, syscall.Signal(m.Signal))
		}
	}
}

// died ends every child's wait: with the server gone (it dies with batchfit,
// and its children with it, by their parent-death signal) no exit will be
// reported. A child still running then counts as killed.
func (s *server) died() {
	s.mu.Lock()
	s.dead = true
	children := s.children
	s.children = map[int]*child{}
	for pid, c := range children {
		select {
		case <-c.exited: // the server said how it ended, before it died
		default:
			s.orphaned[pid] = true
		}
	}
	s.mu.Unlock()
	for _, c := range children {
		c.exit(-1, syscall.SIGKILL)
	}
	close(s.done)
}

// call sends one request and waits for its reply.
func (s *server) call(req any, timeout time.Duration) (message, error) {
	if err := s.send(req); err != nil {
		return message{}, fmt.Errorf("%w: write request: %v", errServer, err)
	}
	select {
	case m := <-s.replies:
		return m, nil
	case <-s.done:
		return message{}, fmt.Errorf("%w: exited", errServer)
	case <-time.After(timeout):
		return message{}, fmt.Errorf("%w: no reply after %s", errServer, timeout)
	}
}

// send writes one request line.
func (s *server) send(req any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err = s.req.Write(append(b, '\n'))
	return err
}

// preloaded is what a server made of a preload request.
type preloaded struct {
	loaded  []string
	dropped []Dropped
	// poisoned says the server must not be used: a module started a
	// thread or a GPU runtime, and no backup could take over.
	poisoned bool
	// packages are the third-party top-level packages the server holds
	// after its imports: those loaded and what they imported.
	packages []string
}

// preload imports modules in the server, one at a time: a module that
// would spoil it is dropped, and the server that replies may be a backup
// that took over from the process that imported it (see forkserver.py). A guess (the
// script's imports, home its directory) imports only the names that are
// third-party packages and skips the rest without a word.
func (s *server) preload(modules []string, guess bool, home string, timeout time.Duration) (preloaded, error) {
	s.launch.Lock()
	defer s.launch.Unlock()
	return s.request(modules, guess, home, timeout)
}

// preloadIdle is preload once every trial forked from s has ended and been
// reaped, and forks none meanwhile: the server then forks a backup before
// each import, which takes over if the import spoils it. One with trials
// would import in place (only it can report their exits): an unsafe module
// would poison it, a failed one leave half a package in it, and the
// trials' exits would wait for the imports (a trial that ended could
// reach its time limit meanwhile). The guessed server, which the first
// trials are forked from, imports what their report adds this way.
func (s *server) preloadIdle(modules []string, timeout time.Duration) (preloaded, error) {
	s.launch.Lock()
	defer s.launch.Unlock()
	s.awaitIdle()
	return s.request(modules, false, "", timeout)
}

// request is preload's request and reply; s.launch is held.
func (s *server) request(modules []string, guess bool, home string, timeout time.Duration) (preloaded, error) {
	req := map[string]any{"op": "preload", "modules": modules}
	if guess {
		req["third_party_only"], req["home"] = true, home
	}
	m, err := s.call(req, timeout)
	if err != nil {
		return preloaded{}, err
	}
	if m.Event != "preloaded" {
		return preloaded{}, fmt.Errorf("%w: preload: %s %s", errServer, m.Event, m.Error)
	}
	if m.PID > 1 {
		s.mu.Lock()
		s.pid = m.PID
		s.mu.Unlock()
	}
	return preloaded{loaded: m.Loaded, dropped: m.Dropped, poisoned: m.Poisoned, packages: m.Packages}, nil
}

// launchTimeout bounds a fork, which takes milliseconds; a server that does
// not answer in time is taken for dead.
const launchTimeout = 30 * time.Second

// Launch forks the trial's leader from the server.
func (s *server) Launch(l trial.Launch) (trial.Leader, error) {
	s.launch.Lock()
	defer s.launch.Unlock()
	m, err := s.call(map[string]any{
		"op": "run", "argv": l.Argv, "env": l.Env, "cwd": l.Dir,
		"stdout": l.Stdout, "stderr": l.Stderr, "cgroup": l.Cgroup,
	}, launchTimeout)
	if err != nil {
		return nil, err
	}
	if m.Event != "started" || m.PID < 2 {
		return nil, fmt.Errorf("%w: %s", errServer, m.Error)
	}
	c := &child{s: s, pid: m.PID, inCgroup: m.Cgroup, exited: make(chan struct{})}
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		c.exit(-1, syscall.SIGKILL)
		return c, nil
	}
	early, ok := s.early[c.pid]
	delete(s.early, c.pid)
	if !ok {
		s.children[c.pid] = c
	}
	s.mu.Unlock()
	if ok {
		c.exit(early.Code, syscall.Signal(early.Signal))
	}
	return c, nil
}

// close ends the server: it exits when its request channel closes; one that
// does not within a few seconds is killed with its group. cmd is waited for
// only to reap it: after a handover it exited long before, and the server
// that took over, re-parented to batchfit, is reaped with the group.
func (s *server) close() {
	s.req.Close()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.kill()
	}
	_ = s.cmd.Wait()
	procgroup.ReapGroup(s.pgid)
}

// retire closes the server once the trials forked from it have ended and
// been reaped: a server closed under a running trial would take it along
// (the parent-death signal), and the trial would have to run again.
func (s *server) retire() {
	s.awaitIdle()
	s.close()
}

// awaitIdle returns once no trial forked from s is left to reap, or s died.
// A child leaves s.children only after its reap request was sent, so a
// request sent after this reaches the server after those reaps.
func (s *server) awaitIdle() {
	for s.busy() {
		time.Sleep(50 * time.Millisecond)
	}
}

// busy says a trial forked from s is still to be reaped.
func (s *server) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.children) > 0 && !s.dead
}

// killedChildren reports whether res, a trial forked from s, ended because
// s died: its children die with it (their parent-death signal). It asks
// whether the server's death ended this trial's wait (s.orphaned), not
// whether s is dead: a server closed once its trials were reaped (retire)
// is dead too by the time a trial killed otherwise (the kernel's OOM
// killer) is judged.
func (s *server) killedChildren(res trial.Result) bool {
	s.mu.Lock()
	orphaned := s.orphaned[res.PID]
	s.mu.Unlock()
	return orphaned && res.Signal == syscall.SIGKILL && !res.TimedOut && !res.Canceled
}

// kill kills the server's process group at once (it imports; its children,
// if any, die with it by their parent-death signal). The group outlives
// cmd's process, which led it, while a backup that took over is in it.
func (s *server) kill() { _ = procgroup.KillGroup(s.pgid, syscall.SIGKILL) }

// child is a forked trial leader.
type child struct {
	s        *server
	pid      int
	inCgroup bool

	once   sync.Once
	exited chan struct{}
	code   int
	sig    syscall.Signal
}

var _ trial.Leader = (*child)(nil)

func (c *child) exit(code int, sig syscall.Signal) {
	c.once.Do(func() {
		c.code, c.sig = code, sig
		close(c.exited)
	})
}

func (c *child) PID() int                { return c.pid }
func (c *child) InCgroup() bool          { return c.inCgroup }
func (c *child) Exited() <-chan struct{} { return c.exited }

// Reap tells the server to reap the child, whose pid it kept reserved. The
// request goes before the child leaves s.children, for awaitIdle.
func (c *child) Reap() (int, syscall.Signal) {
	<-c.exited
	_ = c.s.send(map[string]any{"op": "reap", "pid": c.pid})
	c.s.mu.Lock()
	delete(c.s.children, c.pid)
	c.s.mu.Unlock()
	return c.code, c.sig
}
