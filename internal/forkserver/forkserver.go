// Package forkserver runs Python trials as children forked from a long-lived
// parent that has already imported the program's heavy third-party modules
// (torch, torchvision, ...), so that a trial skips most of its start-up. The
// parent never initialises CUDA or any GPU runtime: each child makes its own
// CUDA context, and its GPU memory is as clean as a fresh process's.
//
// The Executor learns what to preload from the first trial's report (the
// adapter's; third-party top-level packages only). A server starts as the
// first trial does, from a guess: the names the script imports, of which
// the server imports only the third-party packages. The first trial waits
// for it and is forked from it (it runs as a fresh process when the guess
// gave no server); its report then says what the server must import
// besides. Anything the server cannot run as the interpreter would
// (options, launchers, another interpreter or environment, a server that
// failed) runs as a fresh process. Everything else about a trial (time
// limit, the kill of its group and descendants, logs, cgroup) is
// internal/trial's.
package forkserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/trial"
)

// Options shape an Executor.
type Options struct {
	// LogDir holds the server's own output (forkserver.log); "" discards it.
	LogDir string
	// Notice tells the user of a server that failed, after which trials
	// run as fresh processes; nil says nothing.
	Notice func(msg string)
	// Detail tells what preloading did that changes no answer: the
	// packages a server preloaded, and those it left out and why; nil says
	// nothing.
	Detail func(msg string)
	// StartTimeout bounds the server's start and its preloading (imports
	// of large packages take seconds); 0 means DefaultStartTimeout.
	StartTimeout time.Duration
	// Wait makes the trial after the one the modules were learned from
	// wait for the server, rather than run fresh while it preloads. Tests
	// set it; a search gains from not waiting. (A trial before any report
	// waits for the guessed server either way, and so do the trials while
	// it imports what the report added: see Executor.server.)
	Wait bool
}

// DefaultStartTimeout bounds a server's start and preloading.
const DefaultStartTimeout = 5 * time.Minute

// maxServers bounds how many servers one search starts. A module that
// started a thread or a GPU runtime is dropped by a backup of the server
// taking over from the process that imported it (see forkserver.py), so one
// server is the rule; only a server that could not fork a backup is
// poisoned by such a module, and each costs one more server, which imports
// everything before it again.
const maxServers = 5

// Executor runs trials, forking those it can from a preloading server.
// It has the contract of trial.Run (probe.Executor).
type Executor struct {
	opts Options

	// primed is done once the first forkable trial (or Prime) made or
	// tried a guess; trials beside it wait for that, to find the guess.
	primed sync.Once

	mu      sync.Mutex
	key     key           // what the server is, or is being, started for
	learned bool          // the modules were learned; a server was started or tried
	ready   chan struct{} // closed once starting has ended, well or not
	srv     *server       // nil when none is usable
	pending *server       // the server being started and preloaded, if any
	closed  bool
	// modules are what the server preloads (less those it dropped), for
	// a server started anew for another environment (rekey); once learned,
	// the packages the first trial reported.
	modules []string
	rekeys  int
	// guessing says the server is, or is being, started from the script's
	// imports and is still to be checked against the first trial's report
	// (settleGuess).
	guessing bool
	guess    preloaded // what the guessed server made of the guess
	// incremental says the server being readied is the guessed one,
	// importing only what the first report added: trials wait for it, as
	// it is ready sooner than a fresh trial would have imported everything
	// (docs/design/preloading.md).
	incremental bool
	dropped     []string // modules a server dropped: never asked for again
}

// wanted is what a server is asked to preload: the packages a trial
// reported, or a guess (the names the script imports, home its directory).
type wanted struct {
	modules []string
	guess   bool
	home    string
	// onto is the guessed server, to import into it the reported packages
	// it missed (modules) rather than import everything again in a new
	// one; had are the packages it preloaded, all the whole report, for a
	// server started anew if onto turns unsafe.
	onto *server
	had  []string
	all  []string
}

// maxRekeys bounds how often a server is started anew because the trials'
// environment changed (JAX's pool fraction once the first trial measured
// what lies outside it; torch's cap is a trial's own, perTrialEnv): each
// costs the imports again.
const maxRekeys = 2

// New returns an Executor; Close stops its server.
func New(opts Options) *Executor {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.Notice == nil {
		opts.Notice = func(string) {}
	}
	if opts.Detail == nil {
		opts.Detail = func(string) {}
	}
	return &Executor{opts: opts}
}

// Run runs spec, forked when the server can run it, else fresh. The first
// trial of a forkable command to end, fresh or forked from the guessed
// server, teaches the server what to preload; a trial that never started
// (canceled before) has nothing to teach.
func (e *Executor) Run(ctx context.Context, spec trial.Spec, w trial.Watcher) (trial.Result, error) {
	k, forkable := keyOf(spec)
	if forkable {
		e.prime(k, spec)
	}
	if srv, guessed := e.server(ctx, k, forkable, spec.Timeout); srv != nil {
		forked := spec
		forked.Launcher = srv
		res, err := trial.Run(ctx, forked, w)
		// A trial whose log could not be written ran all the same.
		ran := err == nil || errors.As(err, new(*trial.LogError))
		switch {
		case ran && srv.killedChildren(res):
			// The server died under the trial (the kernel's OOM killer
			// chose it, say), and its children with it: nothing is known
			// of this size yet.
			e.drop(srv, "preload: the fork server died during a trial; that trial and later ones run as fresh processes")
		case ran:
			res.Forked = res.PID != 0 // 0: canceled before it started
			if guessed && res.Forked {
				e.learn(k, spec)
			}
			return res, err
		case !errors.Is(err, errServer):
			return res, err
		default:
			e.drop(srv, fmt.Sprintf("preload: the fork server failed (%v); trials run as fresh processes", err))
		}
	}
	res, err := trial.Run(ctx, spec, w)
	if err == nil && forkable && res.PID != 0 {
		e.learn(k, spec)
	}
	return res, err
}

// server is the server to fork spec's trial from, or nil; guessed says it
// is the guessed server before any trial's report was learned (the trial
// then teaches, as a fresh one would). Nil too when ctx ends while the
// trial waits (trial.Run then reports it canceled, as it does any trial
// canceled before it started), or when the guess takes longer than the
// trial's own time limit, limit (0: none): the guess's imports are the
// trial's own, which would then meet that limit in a fresh trial.
func (e *Executor) server(ctx context.Context, k key, forkable bool, limit time.Duration) (srv *server, guessed bool) {
	if !forkable {
		return nil, false
	}
	for {
		e.mu.Lock()
		ready, learned, same, guessing, incremental := e.ready, e.learned, e.key == k, e.guessing, e.incremental
		e.mu.Unlock()
		switch {
		case !learned && guessing && same:
			if !awaitReady(ctx, ready, limit) {
				return nil, false
			}
			if srv, still := e.guessed(k, ready); still {
				return srv, srv != nil
			}
			continue // learned meanwhile, or started anew
		case !learned:
			return nil, false // no guess, or one for another environment
		case !same:
			e.rekey(k)
			return nil, false
		}
		if e.opts.Wait || incremental {
			awaitReady(ctx, ready, limit)
		}
		select {
		case <-ready:
		default:
			return nil, false // still preloading: this trial runs fresh
		}
		e.mu.Lock()
		srv, anew := e.srv, e.ready != ready || e.key != k
		e.mu.Unlock()
		if !anew {
			return srv, false
		}
		// A server was started anew meanwhile: wait for that one.
	}
}

// guessed returns the guessed server that ready is of, once ready has
// closed; still says it is still the server to fork from (nil when the
// guess gave none: the trial runs fresh), not when, meanwhile, a report
// was learned or another server started.
//
// A trial before any report waits for it: the guess imports what the
// trial's own start would (the script's third-party imports), so the wait
// costs no more than a fresh start, and the fork saves the interpreter's
// start and the imports the trial would do on top, most of a fresh trial's
// time (docs/design/preloading.md).
func (e *Executor) guessed(k key, ready chan struct{}) (srv *server, still bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srv, !e.learned && e.guessing && e.ready == ready && e.key == k
}

// awaitReady waits until ready closes, ctx ends or limit passes (0: no
// limit); false when ready did not close.
func awaitReady(ctx context.Context, ready <-chan struct{}, limit time.Duration) bool {
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	select {
	case <-ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// Prime starts the server for spec's trials, from the program's imports,
// before any trial runs (probe.Primer): a warm worker's search runs fresh
// trials only to confirm its answer, and the server is ready by then.
func (e *Executor) Prime(spec trial.Spec) {
	if k, ok := keyOf(spec); ok {
		e.prime(k, spec)
	}
}

// prime starts a server for k in the background as the first forkable
// trial starts, with the names spec's script imports as a guess of what to
// preload (the server imports only those that are third-party packages):
// the trials before any report wait for it and are forked from it. When the
// guess fails or finds nothing to import, they run fresh and the first
// one's report is learned as without it. Only the first call guesses; the
// others return once it has, so that a trial beside the first finds the
// guess under way rather than none.
func (e *Executor) prime(k key, spec trial.Spec) {
	e.primed.Do(func() { e.startGuess(k, spec) })
}

// startGuess is prime's first call.
func (e *Executor) startGuess(k key, spec trial.Spec) {
	e.mu.Lock()
	stale := e.learned || e.closed
	e.mu.Unlock()
	if stale {
		return
	}
	names := scriptImports(spec.Argv, spec.Dir)
	if len(names) == 0 {
		return
	}
	_, home := programFile(spec.Argv, spec.Dir)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.learned || e.closed {
		return
	}
	e.key, e.guessing = k, true
	e.ready = make(chan struct{})
	go e.serve(k, wanted{modules: names, guess: true, home: home}, e.ready)
}

// learn starts a server for k in the background, preloading the packages
// that spec's trial reported. Only the first forkable trial to end
// teaches. A server started from a guess (prime) is kept when it holds
// every package reported, else it imports those it missed (settleGuess).
func (e *Executor) learn(k key, spec trial.Spec) {
	e.learnPackages(k, reportedPackages(envOf(spec)))
}

// Teach is learn from packages a process running the same program has
// reported (a warm worker's hello): the first fresh trial can then be
// forked too (probe.Primer).
func (e *Executor) Teach(spec trial.Spec, packages []string) {
	if k, ok := keyOf(spec); ok {
		e.learnPackages(k, slices.Clone(packages))
	}
}

func (e *Executor) learnPackages(k key, modules []string) {
	msg := ""
	e.mu.Lock()
	defer func() {
		e.mu.Unlock()
		if msg != "" {
			e.opts.Detail(msg)
		}
	}()
	if e.learned || e.closed {
		return
	}
	e.learned = true
	modules = slices.DeleteFunc(modules, func(m string) bool { return slices.Contains(e.dropped, m) })
	e.modules = modules
	w := wanted{modules: modules}
	if e.guessing {
		select {
		case <-e.ready:
		default:
			// Still importing the guess: its starter settles it (serve).
			return
		}
		srv := e.srv
		e.srv = nil
		if e.key != k {
			// Learned from a trial of another environment than the
			// first's (trials side by side): start as without a guess.
			e.guessing = false
			if srv != nil {
				go srv.retire()
			}
		} else if next, kept, ok := e.settleGuess(srv); ok {
			e.srv, msg = srv, kept
			return
		} else if next != nil {
			w = *next
		}
	}
	e.key = k
	e.ready = make(chan struct{})
	if len(w.modules) == 0 {
		// Nothing heavy to preload (or no report): a fork would save only
		// the interpreter's own start.
		close(e.ready)
		return
	}
	go e.serve(k, w, e.ready)
}

// settleGuess decides, once both the first trial's report (e.modules) and
// the guessed server srv are in, whether srv is the server to fork from:
// it is when it holds every package the trial reported (or a server dropped
// it). ok says so, and msg is the notice to give. Otherwise next is what to
// start instead: srv importing the packages it missed, or, without srv, a
// server for the report (nil when it named nothing). e.mu is held.
func (e *Executor) settleGuess(srv *server) (next *wanted, msg string, ok bool) {
	e.guessing = false
	if srv == nil {
		if len(e.modules) == 0 {
			return nil, "", false
		}
		return &wanted{modules: slices.Clone(e.modules)}, "", false
	}
	var missing []string
	for _, m := range e.modules {
		if !slices.Contains(e.guess.packages, m) && !slices.Contains(e.guess.loaded, m) && !slices.Contains(e.dropped, m) {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		e.incremental = true
		return &wanted{modules: missing, onto: srv, had: slices.Clone(e.guess.loaded), all: slices.Clone(e.modules)}, "", false
	}
	for _, m := range e.guess.loaded {
		if !slices.Contains(e.modules, m) {
			e.modules = append(e.modules, m)
		}
	}
	return nil, "preload: forking trials from a server that imported " + listed(e.guess.loaded, 8) + " (the script's imports)", true
}

// serve starts a server for k, makes it the one to fork from and closes
// ready. When the trials' environment changed while it started (rekey),
// the server is not used: one for the new environment starts at once. A
// guessed server is settled against the first trial's report if that came
// meanwhile (settleGuess); what it lacks is then imported into it, once the
// trials forked from it have ended (preloadIdle).
func (e *Executor) serve(k key, w wanted, ready chan struct{}) {
	srv, p := e.start(k, strings.Split(k.env, "\x00"), w)
	e.mu.Lock()
	var next *wanted
	use := !e.closed && e.key == k
	if !e.closed && e.key != k {
		next = &wanted{modules: slices.Clone(e.modules)}
	}
	msg := ""
	if use && w.guess {
		e.guess = p
		if e.learned {
			next, msg, use = e.settleGuess(srv)
		}
	}
	key, nextReady := e.key, ready
	if next != nil {
		nextReady = make(chan struct{})
		e.ready = nextReady
		e.guessing = false
	}
	if use {
		e.srv = srv
	}
	e.mu.Unlock()
	if !use && srv != nil && (next == nil || next.onto != srv) {
		srv.close()
	}
	if msg != "" {
		e.opts.Detail(msg)
	}
	close(ready)
	if next != nil {
		e.serve(key, *next, nextReady)
	}
}

// rekey starts a server anew, in the background, for trials whose
// environment is k's rather than the one the server was started with: the
// trials of a search hold one environment but for a change or two early on
// (JAX's pool fraction that the first trial's measurement fixes). The old
// server is closed, one still importing is killed (its starter then starts
// the new one); the trial that asked runs fresh. The guessed server waiting
// for its trials to end before it imports what their report added
// (preloadIdle) is left to do so, not killed under them: its starter then
// starts the new one. Nothing happens after maxRekeys.
func (e *Executor) rekey(k key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.key == k || len(e.modules) == 0 || e.rekeys >= maxRekeys {
		return
	}
	e.rekeys++
	e.key = k
	e.incremental = false // the new server imports everything
	select {
	case <-e.ready:
	default:
		if e.pending != nil && !e.pending.busy() {
			e.pending.kill()
		}
		return
	}
	old := e.srv
	e.srv = nil
	e.ready = make(chan struct{})
	if old != nil {
		go old.retire() // a trial forked from it may still run beside this one
	}
	go e.serve(k, wanted{modules: slices.Clone(e.modules)}, e.ready)
}

// start starts a server that preloads what w wants (or imports it into
// w.onto), without any module that started a thread or a GPU runtime: the
// server drops such a module itself, and is restarted without it only when
// it was poisoned instead (it could not fork a backup); nil when none could
// be had. A guess fails without a word (the report is learned as without
// it), names only the modules that are unsafe (a failed import is the
// program's business), and gives no server when it found nothing to import.
func (e *Executor) start(k key, env []string, w wanted) (*server, preloaded) {
	logPath := ""
	if e.opts.LogDir != "" {
		logPath = filepath.Join(e.opts.LogDir, "forkserver.log")
	}
	fail := e.opts.Notice
	if w.guess {
		fail = func(string) {}
	}
	modules := slices.Clone(w.modules)
	for range maxServers {
		srv := w.onto
		if srv == nil {
			var err error
			srv, err = startServer(k, env, logPath, e.opts.StartTimeout)
			if err != nil {
				fail(fmt.Sprintf("preload: the fork server did not start (%v); trials run as fresh processes", err))
				return nil, preloaded{}
			}
		}
		if !e.setPending(srv) {
			srv.close()
			return nil, preloaded{}
		}
		var p preloaded
		var err error
		if w.onto != nil {
			p, err = srv.preloadIdle(modules, e.opts.StartTimeout)
		} else {
			p, err = srv.preload(modules, w.guess, w.home, e.opts.StartTimeout)
		}
		e.setPending(nil)
		if err != nil {
			srv.close()
			if !e.superseded(k) {
				fail(fmt.Sprintf("preload: %v; trials run as fresh processes", err))
			}
			return nil, preloaded{}
		}
		e.mu.Lock()
		for _, d := range p.dropped {
			e.dropped = append(e.dropped, d.Module)
		}
		gone := func(m string) bool { return slices.Contains(e.dropped, m) }
		modules = slices.DeleteFunc(modules, gone)
		if !w.guess {
			e.modules = slices.DeleteFunc(slices.Clone(e.modules), gone)
		}
		e.mu.Unlock()
		for _, d := range p.dropped {
			if w.guess && !d.Unsafe {
				continue
			}
			e.opts.Detail(fmt.Sprintf("preload: not preloading %s: %s", d.Module, d.Reason))
		}
		switch {
		case p.poisoned:
			srv.close()
			if w.onto != nil {
				// The guessed server is spoiled: a new one imports the
				// whole report.
				e.mu.Lock()
				modules = slices.DeleteFunc(slices.Clone(w.all), gone)
				e.incremental = false // trials no longer wait for it
				e.mu.Unlock()
				w.onto, w.had = nil, nil
			}
		case w.guess && len(p.loaded) == 0:
			srv.close()
			return nil, preloaded{}
		case w.guess:
			return srv, p // its notice once it is settled
		default:
			e.opts.Detail("preload: forking trials from a server that imported " + listed(append(w.had, p.loaded...), 8))
			return srv, p
		}
	}
	fail("preload: every fork server was unsafe to fork from; trials run as fresh processes")
	return nil, preloaded{}
}

// superseded says the server being started for k was stopped for another
// environment (rekey): its failure is no news.
func (e *Executor) superseded(k key) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.key != k
}

// setPending names the server being preloaded, so that Close can stop it;
// false when the Executor is closed already.
func (e *Executor) setPending(srv *server) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending = srv
	return !e.closed
}

// listed names the first n of names, and how many more there are.
func listed(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// drop stops using srv after it failed. A guessed server still to be
// settled fails without a word, as a guess does (start): the report of the
// trial that then runs fresh starts a server of its own (settleGuess), so
// trials do not all run fresh, as msg would say.
func (e *Executor) drop(srv *server, msg string) {
	e.mu.Lock()
	if e.srv != srv {
		e.mu.Unlock()
		return
	}
	e.srv = nil
	guess := e.guessing
	e.mu.Unlock()
	if !guess {
		e.opts.Notice(msg)
	}
	go srv.close()
}

// Close stops the server. Trials must have ended; one still waiting for
// the guessed server runs fresh.
func (e *Executor) Close() error {
	e.mu.Lock()
	e.closed = true
	srv, pending := e.srv, e.pending
	e.srv = nil
	e.mu.Unlock()
	if pending != nil {
		// Still importing: its starter sees it die and closes it.
		pending.kill()
	}
	if srv != nil {
		srv.close()
	}
	return nil
}

// reportedPackages are the third-party packages the trial with env
// reported importing (adapter.Event.Packages), in import order.
func reportedPackages(env []string) []string {
	path, ok := adapter.Lookup(env, adapter.ReportEnv)
	if !ok || path == "" {
		return nil
	}
	events, _, err := adapter.Read(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, ev := range events {
		for _, p := range ev.Packages {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
