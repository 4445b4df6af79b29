package trial

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
)

// drainTimeout bounds the wait for the end of a trial's output once no
// process of the trial is left. Every write end the trial held closed with
// its processes, so the end comes at once; only a process outside the
// trial that was handed a descriptor could hold it open, and it must not
// hold up the end of the trial.
const drainTimeout = 2 * time.Second

// LogError means a trial ran but its output could not be written whole to
// a log file: a full disk, a quota, a folder gone. Result is complete all
// the same, as its outcome is decided from the output as batchfit received
// it, never from what reached the file; the log is not.
type LogError struct {
	Path string // the log file
	Err  error  // the first write error, without the path: syscall.ENOSPC, say
}

func (e *LogError) Error() string { return fmt.Sprintf("write trial log %s: %v", e.Path, e.Err) }
func (e *LogError) Unwrap() error { return e.Err }

// output is a trial's stdout and stderr as batchfit receives them. The
// child writes to pipes, or to FIFOs that a Launcher's child opens by path,
// and batchfit copies each stream to its log file while it feeds a
// classify.Scanner and keeps the stream's tail. So a log that cannot be
// written loses nothing that decides the outcome, and the first write
// error is kept for Run to report.
type output struct {
	stderr, stdout *stream // one stream for both when the log is combined
	fifos          string  // the folder of the FIFOs; "" for pipes
}

// stream is one of a trial's output streams.
type stream struct {
	r *os.File // batchfit's read end
	// w is a write end that batchfit holds until no process of the trial
	// is left, so that the stream cannot end before a launched child has
	// opened its FIFO. For a pipe it is the child's own, held alike.
	w    *os.File
	fifo string // the path a launched child opens; "" for a pipe

	log     io.WriteCloser // the log file; nil when the stream has none
	logPath string
	err     error // the first error writing log

	scan *classify.Scanner
	tail tail
	done chan struct{} // closed when copy returns
}

// openOutput opens the log files (stdoutPath == stderrPath: one combined
// log; "": none) and the streams to them: FIFOs in a folder of their own
// when fifos is set, for a Launcher's child to open, else pipes. On an
// error, op says what failed.
func openOutput(stdoutPath, stderrPath string, tailBytes int, fifos bool) (*output, string, error) {
	o := &output{}
	op, err := o.openAll(stdoutPath, stderrPath, tailBytes, fifos)
	if err != nil {
		o.close()
		return nil, op, err
	}
	for _, s := range o.streams() {
		go s.copy()
	}
	return o, "", nil
}

func (o *output) openAll(stdoutPath, stderrPath string, tailBytes int, fifos bool) (op string, err error) {
	if fifos {
		if o.fifos, err = os.MkdirTemp("", "batchfit-output-"); err != nil {
			return "start", err
		}
	}
	if o.stderr, err = o.open(stderrPath, "stderr", tailBytes); err != nil {
		return "create log", err
	}
	o.stdout = o.stderr
	if stderrPath == "" || stderrPath != stdoutPath {
		if o.stdout, err = o.open(stdoutPath, "stdout", tailBytes); err != nil {
			return "create log", err
		}
	}
	for _, s := range o.streams() {
		if err := s.connect(); err != nil {
			return "start", err
		}
	}
	return "", nil
}

// open creates the stream's log file, if it has one, and its FIFO's path.
func (o *output) open(logPath, name string, tailBytes int) (*stream, error) {
	s := &stream{logPath: logPath, scan: classify.NewScanner(), tail: tail{n: tailBytes}, done: make(chan struct{})}
	if o.fifos != "" {
		s.fifo = filepath.Join(o.fifos, name)
	}
	if logPath != "" {
		f, _, err := OpenLog(logPath, "")
		if err != nil {
			return nil, err
		}
		s.log = f
	}
	return s, nil
}

// connect makes the stream's pipe, or its FIFO with the read end opened
// first (without waiting for a writer) and then batchfit's write end, so
// that neither the child's open nor a read waits for the other side.
func (s *stream) connect() error {
	var err error
	if s.fifo == "" {
		s.r, s.w, err = os.Pipe()
		return err
	}
	if err := syscall.Mkfifo(s.fifo, 0o600); err != nil {
		return &fs.PathError{Op: "mkfifo", Path: s.fifo, Err: err}
	}
	if s.r, err = os.OpenFile(s.fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
		return err
	}
	s.w, err = os.OpenFile(s.fifo, os.O_WRONLY, 0)
	return err
}

// streams are the distinct streams, stderr's first: the order
// internal/classify merges their matches in.
func (o *output) streams() []*stream {
	if o.stdout == nil || o.stdout == o.stderr {
		return nonNil(o.stderr)
	}
	return nonNil(o.stderr, o.stdout)
}

func nonNil(ss ...*stream) []*stream {
	out := ss[:0]
	for _, s := range ss {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// copy reads the stream to its end, or until finish stops it.
func (s *stream) copy() {
	defer close(s.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := s.r.Read(buf)
		if n > 0 {
			s.take(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// take scans p, keeps it for the tail and writes it to the log. After a
// write error the log is given up: its end would be missing anyway, and a
// disk that refused a write would only refuse again.
func (s *stream) take(p []byte) {
	_, _ = s.scan.Write(p)
	s.tail.write(p)
	if s.log == nil || s.err != nil {
		return
	}
	if _, err := s.log.Write(p); err != nil {
		s.err = unwrapPath(err)
	}
}

// finish ends the streams once no process of the trial is left: it lets
// go of batchfit's write ends, waits up to drainTimeout for every stream's
// end, and closes the logs. It returns the first error writing a log,
// stderr's before stdout's, as a *LogError.
func (o *output) finish() error {
	streams := o.streams()
	for _, s := range streams {
		s.w.Close()
		s.w = nil
	}
	deadline := time.NewTimer(drainTimeout)
	defer deadline.Stop()
	for _, s := range streams {
		select {
		case <-s.done:
		case <-deadline.C:
			// Pipes and FIFOs take deadlines: the read under way returns.
			_ = s.r.SetReadDeadline(time.Now())
			<-s.done
		}
	}
	var first error
	for _, s := range streams {
		if s.log != nil {
			if err := s.log.Close(); err != nil && s.err == nil {
				s.err = unwrapPath(err)
			}
			s.log = nil
		}
		if s.err != nil && first == nil {
			first = &LogError{Path: s.logPath, Err: s.err}
		}
	}
	o.close()
	return first
}

// into finishes the streams once no process of the trial is left to write
// to them, and puts their tails and matches in res; the error is finish's.
func (o *output) into(res *Result) error {
	err := o.finish()
	res.StdoutTail = o.stdout.tail.bytes()
	res.StderrTail = o.stderr.tail.bytes()
	res.Matches = o.matches()
	return err
}

// matches are the signatures found in both streams, stderr's first.
func (o *output) matches() *classify.Matches {
	var ms []*classify.Matches
	for _, s := range o.streams() {
		ms = append(ms, s.scan.Matches())
	}
	return classify.Merge(ms...)
}

// close releases what is still open and removes the FIFOs: after finish,
// or before the streams are copied. The logs are closed by finish, which
// sees their errors; here only when the streams could not be opened.
func (o *output) close() {
	for _, s := range o.streams() {
		for _, f := range []*os.File{s.r, s.w} {
			if f != nil {
				f.Close()
			}
		}
		if s.log != nil {
			s.log.Close()
		}
		s.r, s.w, s.log = nil, nil, nil
	}
	if o.fifos != "" {
		os.RemoveAll(o.fifos)
	}
}

// unwrapPath is err without the *fs.PathError around it: LogError names
// the path itself.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// tail keeps the last n bytes written to it, in at most 2n of memory.
type tail struct {
	n   int
	buf []byte
}

func (t *tail) write(p []byte) {
	if len(p) >= t.n {
		t.buf = append(t.buf[:0], p[len(p)-t.n:]...)
		return
	}
	if len(t.buf)+len(p) > 2*t.n {
		t.buf = t.buf[:copy(t.buf, t.buf[len(t.buf)-(t.n-len(p)):])]
	}
	t.buf = append(t.buf, p...)
}

// bytes returns the last n bytes, a copy; nil when none were written.
func (t *tail) bytes() []byte {
	if len(t.buf) == 0 {
		return nil
	}
	return append([]byte(nil), t.buf[max(0, len(t.buf)-t.n):]...)
}
