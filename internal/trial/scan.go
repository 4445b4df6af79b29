package trial

import (
	"io"
	"os"

	"github.com/batchfit/batchfit/internal/classify"
)

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
