package trial

import (
	"os"
	"sync"
	"time"
)

// GateEnv names the descriptor of a gated trial's gate: the read end of a
// pipe the trial inherits. batchfit's adapter waits on it when the program
// first starts its framework on the GPU (torch's CUDA, JAX's backends): a
// byte lets it on, the pipe's end without one means the trial is not
// wanted, and it exits there.
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
	w      *os.File // the write end; nil once opened or closed
	opened chan struct{}
	at     time.Time
}

// NewGate returns a closed gate, for one trial's Spec.Gate.
func NewGate() *Gate {
	return &Gate{opened: make(chan struct{})}
}

// Open lets the trial on, once; it says whether this call opened it (false
// when it was opened before or the trial has ended).
func (g *Gate) Open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil {
		return false
	}
	_, err := g.w.Write([]byte{'1'})
	g.w.Close()
	g.w = nil
	if err != nil {
		// The trial has gone, and its pipe with it.
		return false
	}
	g.at = time.Now()
	close(g.opened)
	return true
}

// arm makes the pipe for a trial about to start and returns the end the
// trial inherits.
func (g *Gate) arm() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.w = w
	g.mu.Unlock()
	return r, nil
}

// end closes the write end of a gate never opened: the trial is over.
func (g *Gate) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
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
