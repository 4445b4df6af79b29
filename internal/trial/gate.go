package trial

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// GateEnv names the descriptor of a gated trial's gate: the read end of a
// pipe the trial inherits. batchfit's adapter waits on it in each process
// of the trial when the program first starts its framework on the GPU
// (torch's CUDA, JAX's backends): a byte lets it on, the pipe's end without
// one means batchfit is gone, and it exits there (status 75). Its value is
// FD:INODE, the pipe's inode telling it from a descriptor reused.
const GateEnv = "BATCHFIT_GATE_FD"

// gateFD is the gate's descriptor in the trial: the first of exec's
// ExtraFiles.
const gateFD = 3

// Gate holds a trial at the start of its GPU work until Open, so that its
// process can start (interpreter, imports, data on the CPU) while another
// trial still has the GPU. Its time limit, Start and Duration run from
// Open. Only a trial that Run execs can be gated (not a Launcher's).
type Gate struct {
	mu     sync.Mutex
	w      *os.File // the write end, while the trial runs
	ended  bool     // the trial is over (or never started)
	opened chan struct{}
	at     time.Time
}

// NewGate returns a closed gate, for one trial's Spec.Gate.
func NewGate() *Gate {
	return &Gate{opened: make(chan struct{})}
}

// Open lets the trial on, once, even before its process has started (it
// then goes on at its gate at once); it says whether this call opened it
// (false when it was opened before or the trial has ended). Every process
// of the trial that reaches the gate takes a byte of openBytes, and the
// pipe stays open until the trial ends, so that one that reaches it later
// goes on too.
func (g *Gate) Open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended || g.isOpen() {
		return false
	}
	if g.w != nil {
		if err := letThrough(g.w); err != nil {
			// The trial has gone, and its pipe with it.
			return false
		}
	}
	g.at = time.Now()
	close(g.opened)
	return true
}

// openBytes is what an opened gate holds for its waiters: one each, and
// within a pipe's buffer, so that writing them does not block.
const openBytes = 4096

func letThrough(w *os.File) error {
	_, err := w.Write(bytes.Repeat([]byte{'1'}, openBytes))
	return err
}

func (g *Gate) isOpen() bool {
	select {
	case <-g.opened:
		return true
	default:
		return false
	}
}

// arm makes the pipe for a trial about to start and returns the end the
// trial inherits, with GateEnv's value for it; a gate opened already lets
// it through at once.
func (g *Gate) arm() (*os.File, string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, "", err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(r.Fd()), &st); err != nil {
		r.Close()
		w.Close()
		return nil, "", err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isOpen() {
		if err := letThrough(w); err != nil {
			r.Close()
			w.Close()
			return nil, "", err
		}
	}
	g.w = w
	return r, fmt.Sprintf("%d:%d", gateFD, st.Ino), nil
}

// end closes the write end: the trial is over, and the gate opens no more.
// A nil gate (a trial without one) has nothing to end.
func (g *Gate) end() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ended = true
	if g.w != nil {
		g.w.Close()
		g.w = nil
	}
}

// openedAt is when Open let the trial on; false when it never did.
func (g *Gate) openedAt() (time.Time, bool) {
	select {
	case <-g.opened:
		return g.at, true
	default:
		return time.Time{}, false
	}
}
