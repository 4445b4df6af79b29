package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// browser is a running headless Chromium and a DevTools protocol client
// over its pipe: Chromium reads JSON messages ended by a NUL byte from file
// descriptor 3 and writes them to descriptor 4.
type browser struct {
	cmd     *exec.Cmd
	dir     string // the throwaway profile
	toPipe  *os.File
	log     *tailBuffer
	done    chan struct{} // closed when the reader stops: Chromium is gone
	waitErr error

	mu       sync.Mutex
	nextID   int
	pending  map[int]chan reply
	watchers map[string]*watcher
}

type reply struct {
	result json.RawMessage
	err    error
}

// message is any DevTools message: a reply has an ID, an event a method.
type message struct {
	ID        int             `json:"id"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	Result    json.RawMessage `json:"result"`
	SessionID string          `json:"sessionId"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// launch starts Chromium with a fresh profile. The flags keep it from
// calling home (sync, component updates, background networking, QUIC) and
// let it run as root in a container without a sandbox or a GPU.
func launch(ctx context.Context, exe string) (*browser, error) {
	dir, err := os.MkdirTemp("", "batchfit-chromium-*")
	if err != nil {
		return nil, fmt.Errorf("make a chromium profile: %w", err)
	}
	toR, toW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("make the devtools pipe: %w", err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		toR.Close()
		toW.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("make the devtools pipe: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe,
		"--headless",
		"--no-sandbox",
		"--disable-gpu",
		"--disable-quic",
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--disable-extensions",
		"--mute-audio",
		"--hide-scrollbars",
		"--user-data-dir="+dir,
		"--enable-logging=stderr",
		"--v=0",
		fmt.Sprintf("--window-size=%d,%d", windowWidth, windowHeight),
		"--remote-debugging-pipe",
		"about:blank",
	)
	log := &tailBuffer{max: 64 << 10}
	cmd.Stderr = log
	cmd.Stdout = log
	cmd.ExtraFiles = []*os.File{toR, fromW} // descriptors 3 and 4
	killGroup(cmd)
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		toR.Close()
		toW.Close()
		fromR.Close()
		fromW.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	// Chromium holds its own copies; closing ours lets a read see EOF when
	// it exits.
	toR.Close()
	fromW.Close()
	b := &browser{
		cmd:      cmd,
		dir:      dir,
		toPipe:   toW,
		log:      log,
		done:     make(chan struct{}),
		pending:  map[int]chan reply{},
		watchers: map[string]*watcher{},
	}
	go b.read(fromR)
	return b, nil
}

// read dispatches Chromium's messages until the pipe closes.
func (b *browser) read(r *os.File) {
	defer close(b.done)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			for id, ch := range b.pending {
				ch <- reply{err: errors.New("chromium closed the devtools pipe")}
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var m message
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				delete(b.pending, m.ID)
				if m.Error != nil {
					ch <- reply{err: errors.New(m.Error.Message)}
				} else {
					ch <- reply{result: m.Result}
				}
			}
		} else if w, ok := b.watchers[m.SessionID]; ok {
			w.event(m.Method, m.Params)
		}
		b.mu.Unlock()
	}
}

// call sends one command (to a page session, or to the browser when session
// is empty) and decodes its result into out when out is not nil.
func (b *browser) call(ctx context.Context, session, method string, params any, out any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan reply, 1)
	b.pending[id] = ch
	b.mu.Unlock()

	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if _, err := b.toPipe.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: send: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return fmt.Errorf("%s: %w", method, r.err)
		}
		if out != nil {
			if err := json.Unmarshal(r.result, out); err != nil {
				return fmt.Errorf("%s: decode reply: %w", method, err)
			}
		}
		return nil
	case <-b.done:
		return fmt.Errorf("%s: %w", method, b.exitErr())
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// watch starts collecting the events of one attached target.
func (b *browser) watch(session string) *watcher {
	w := &watcher{loaded: make(chan struct{}), seen: map[string]bool{}}
	b.mu.Lock()
	b.watchers[session] = w
	b.mu.Unlock()
	return w
}

// exitErr describes Chromium going away, with the end of its log.
func (b *browser) exitErr() error {
	return fmt.Errorf("chromium stopped:\n%s", errorTail(b.log.Bytes()))
}

// close asks Chromium to quit, waits for it (killing it when it does not
// go), and removes the profile.
func (b *browser) close() {
	defer os.RemoveAll(b.dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The reply may never come: Chromium can close the pipe first.
	_ = b.call(ctx, "", "Browser.close", nil, nil)
	b.toPipe.Close()
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		stopGroup(b.cmd)
		<-exited
	}
	// Helpers that outlived the browser process go with its group.
	stopGroup(b.cmd)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}
