package trial

import (
	"io"
	"os"
	"time"

	"github.com/batchfit/batchfit/internal/classify"
)

// scanInterval is how often the log files are read while a trial runs.
const scanInterval = 200 * time.Millisecond

// logScan reads a trial's log files as the trial writes them and feeds every
// byte to a classify.Scanner, so that an error text anywhere in the output
// is found, not only in the tail, without holding the output in memory. The
// trial writes to the files directly (see logs); logScan reads them through
// descriptors of its own.
type logScan struct {
	files []*os.File // stderr first, then stdout unless it is the same file
	scans []*classify.Scanner
	buf   []byte
	stop  chan struct{}
	done  chan struct{}
}

// startLogScan starts reading the log files at paths (the same path once). It
// returns nil when a file cannot be opened: classification then reads the
// tails instead.
func startLogScan(paths ...string) *logScan {
	l := &logScan{buf: make([]byte, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	for i, p := range paths {
		if i > 0 && p == paths[0] {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			l.close()
			return nil
		}
		l.files = append(l.files, f)
		l.scans = append(l.scans, classify.NewScanner())
	}
	go func() {
		defer close(l.done)
		t := time.NewTicker(scanInterval)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				l.read()
			}
		}
	}()
	return l
}

// read feeds what the files gained since the last read to the scanners.
func (l *logScan) read() {
	for i, f := range l.files {
		_, _ = io.CopyBuffer(l.scans[i], onlyReader{f}, l.buf)
	}
}

// finish reads the files to their end, once nothing writes to them any more,
// and returns what was found: stderr's matches, then stdout's.
func (l *logScan) finish() *classify.Matches {
	if l == nil {
		return nil
	}
	close(l.stop)
	<-l.done
	l.read()
	l.close()
	ms := make([]*classify.Matches, len(l.scans))
	for i, s := range l.scans {
		ms[i] = s.Matches()
	}
	return classify.Merge(ms...)
}

func (l *logScan) close() {
	for _, f := range l.files {
		f.Close()
	}
}

// onlyReader hides the file's WriterTo, so that io.CopyBuffer reads into
// the one buffer it is given.
type onlyReader struct{ io.Reader }

// ScanLog matches the error signatures against the file at path from offset
// from to its end (a log that earlier trials wrote to starts at from),
// reading it in pieces. It is nil if the file cannot be read.
func ScanLog(path string, from int64) *classify.Matches {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil
	}
	s := classify.NewScanner()
	if _, err := io.CopyBuffer(s, onlyReader{f}, make([]byte, 64<<10)); err != nil {
		return nil
	}
	return s.Matches()
}
