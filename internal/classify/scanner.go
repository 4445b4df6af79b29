package classify

import (
	"bytes"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/batchfit/batchfit/internal/adapter"
)

// reportFailed begins the adapter's line saying it could not write its
// report (see Matches.ReportLost).
var reportFailed = []byte(adapter.ReportFailedPrefix)

// Bounds of a Scanner's memory. A line longer than maxLine is matched in
// windows of maxLine bytes, each starting with the last overlap bytes of the
// one before, so a signature anywhere in a line of any length is found as
// long as it is shorter than overlap (the longest in the table is about a
// hundred bytes, a TensorFlow tensor shape included).
const (
	maxLine = 16 << 10
	overlap = 1 << 10
)

// reasonLead is how much of a line before a match a Reason keeps when the
// match lies too far into the line to show the line from its start.
const reasonLead = 40

// Scanner finds the error signatures in a trial's output as it is written:
// every byte goes through it, and it keeps, per signature, the last line
// that matched, in bounded memory whatever the output (any number of lines,
// a line of any length). Lines end at "\n" or "\r" (CRLF endings, progress
// bars redrawn with a carriage return). The zero value is ready to use. A
// Scanner is not safe for concurrent use.
type Scanner struct {
	line  []byte // the current line's part not yet matched, at most maxLine bytes
	cont  bool   // line continues a long line whose start was matched already
	found []found
	// reportLost is the last line in which the adapter said it could not
	// write its report, from adapter.ReportFailedPrefix on.
	reportLost string
}

// found is one signature's last matching line, and its last matching line
// in an error's form (see errorForm).
type found struct {
	line string // trimmed and shortened to about maxReason bytes
	ok   bool
	// errLine and errOK are the same for the lines in an error's form.
	errLine string
	errOK   bool
}

// Matches is what a Scanner found: for each signature, whether it matched
// and the last line that did. A nil *Matches has found nothing.
type Matches struct {
	found      []found
	reportLost string
}

// NewScanner returns a Scanner that has seen no output.
func NewScanner() *Scanner {
	return &Scanner{}
}

// Scan matches a whole output held in memory, as a Scanner fed all of it.
func Scan(output []byte) *Matches {
	s := NewScanner()
	_, _ = s.Write(output)
	return s.Matches()
}

// Write matches p against the signatures. It never fails.
func (s *Scanner) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(s.line) == 0 && !s.cont {
			// At a line start, the whole short lines ahead are matched
			// where they are, without a copy.
			if run := shortLines(p); run > 0 {
				s.match(p[:run], false)
				p = p[run:]
				continue
			}
		}
		i := indexBreak(p)
		if i < 0 {
			s.add(p)
			break
		}
		s.add(p[:i])
		s.endLine()
		p = p[i+1:]
	}
	return n, nil
}

// Matches ends the current line (output need not end with a newline) and
// returns what was found so far. Writing may go on afterwards, from a new
// line.
func (s *Scanner) Matches() *Matches {
	if len(s.line) > 0 {
		s.endLine()
	}
	s.cont = false
	return &Matches{found: append([]found(nil), s.found...), reportLost: s.reportLost}
}

// ReportLost is the adapter's word, in the output, that it could not write
// its report, as the last line that said so; nil when none did.
func (m *Matches) ReportLost() *adapter.ReportError {
	if m == nil || m.reportLost == "" {
		return nil
	}
	e, _ := adapter.ParseReportFailure(m.reportLost)
	return e
}

// add appends p to the current line. A line that would outgrow maxLine is
// matched as it stands and cut to its last overlap bytes.
func (s *Scanner) add(p []byte) {
	if s.line == nil {
		s.line = make([]byte, 0, maxLine)
	}
	for len(s.line)+len(p) > maxLine {
		k := maxLine - len(s.line)
		s.line = append(s.line, p[:k]...)
		p = p[k:]
		s.match(s.line, s.cont)
		s.cont = true
		s.line = s.line[:copy(s.line, s.line[len(s.line)-overlap:])]
	}
	s.line = append(s.line, p...)
}

func (s *Scanner) endLine() {
	s.match(s.line, s.cont)
	s.line, s.cont = s.line[:0], false
}

// match records, for every signature, its last match in seg: whole lines
// (the breaks between them included), or one piece of a long line without
// a break. midLine says seg is such a piece, past the line's start, where
// line-anchored patterns cannot match.
func (s *Scanner) match(seg []byte, midLine bool) {
	if j := bytes.LastIndex(seg, reportFailed); j >= 0 {
		le := len(seg)
		if k := indexBreak(seg[j:]); k >= 0 {
			le = j + k
		}
		if _, ok := adapter.ParseReportFailure(string(seg[j:le])); ok {
			s.reportLost = string(seg[j:le])
		}
	}
	for i := range signatures {
		sig := &signatures[i]
		lit := sig.litBytes
		if !bytes.Contains(seg, lit) {
			continue
		}
		if sig.anchored && midLine {
			continue
		}
		// From the last match back: the last line that matched, and the
		// last that matched in an error's form, which may lie before it.
		matched := false
		end := len(seg)
		for {
			j := bytes.LastIndex(seg[:end], lit)
			if j < 0 {
				break
			}
			ls := lastBreak(seg[:j]) + 1
			le := len(seg)
			if k := indexBreak(seg[j:]); k >= 0 {
				le = j + k
			}
			line := seg[ls:le]
			a, b := j-ls, j-ls+len(lit)
			ok := true
			if sig.re != nil {
				all := sig.re.FindAllIndex(line, -1)
				if ok = all != nil; ok {
					a, b = all[len(all)-1][0], all[len(all)-1][1]
				}
			}
			if ok {
				if s.found == nil {
					s.found = make([]found, len(signatures))
				}
				f := &s.found[i]
				reason := reasonLine(line, a, b, midLine)
				if !matched {
					f.line, f.ok, matched = reason, true, true
				}
				if errorForm(line, a, midLine) {
					f.errLine, f.errOK = reason, true
					break
				}
			}
			end = ls
		}
	}
}

// The shapes of a line that reports an error, as opposed to one that
// mentions its words (a note, a tip, a quoted config value):
//   - exceptionLine: the exception's own line, which is also a traceback's
//     last line ("torch.OutOfMemoryError: CUDA out of memory. ...",
//     "RuntimeError: CUDA error: out of memory"), after torchrun's rank
//     prefix;
//   - errorLogLine: a log line of level ERROR, CRITICAL or FATAL;
//   - allocatorMessage: PyTorch's allocator message with its figures ("out
//     of memory. Tried to allocate 2.00 GiB"), which only the allocator
//     writes, wherever a program that caught it logs it.
var (
	exceptionLine    = regexp.MustCompile(`^\s*` + rankPrefix + `(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception)\b`)
	errorLogLine     = regexp.MustCompile(`(?:^|[\s\[|])(?:ERROR|CRITICAL|FATAL)(?:[\s\]|:]|$)`)
	allocatorMessage = regexp.MustCompile(`out of memory\. Tried to allocate \d`)
)

// errorForm reports whether line, which holds a signature's match from
// byte a, reports the error rather than mentions it: it has one of the
// shapes above, or the match starts the line (a status line such as
// "CUBLAS_STATUS_ALLOC_FAILED", "CUDA error: out of memory", after a
// source location "file.cu:12:"). A piece of a long line past its start
// has only the allocator's figures to tell.
func errorForm(line []byte, a int, midLine bool) bool {
	if allocatorMessage.Match(line) {
		return true
	}
	if midLine {
		return false
	}
	return exceptionLine.Match(line) || errorLogLine.Match(line) || statusStart.Match(line[:a])
}

// statusStart is what may come before a status line's text: spaces,
// torchrun's rank prefix, a source location.
var statusStart = regexp.MustCompile(`^\s*` + rankPrefix + `(?:\S+:\d+:\s*)?$`)

// reasonLine is the line holding line[a:b], trimmed and shortened for a
// Reason: from its start when the match shows there, otherwise from a
// little before the match.
func reasonLine(line []byte, a, b int, midLine bool) string {
	trimmed := bytes.TrimLeftFunc(line, unicode.IsSpace)
	lead := len(line) - len(trimmed)
	line = bytes.TrimRightFunc(trimmed, unicode.IsSpace)
	a, b = max(a-lead, 0), max(b-lead, 0)
	prefix := ""
	if midLine {
		prefix = "…"
	}
	if b > maxReason {
		start := max(a-reasonLead, 0)
		if i := bytes.IndexByte(line[start:a], ' '); i >= 0 {
			start += i + 1 // from a word's start
		}
		for start > 0 && !utf8.RuneStart(line[start]) {
			start--
		}
		line, prefix = line[start:], "…"
	}
	// Cut before converting: a line can be maxLine bytes long. One byte
	// more than maxReason keeps shorten's "…".
	if len(line) > maxReason+1 {
		line = line[:maxReason+1]
	}
	return prefix + shorten(strings.TrimSpace(string(line)))
}

// shortLines returns the length of the longest prefix of p made of whole
// lines of at most maxLine bytes each, their breaks included.
func shortLines(p []byte) int {
	n := 0
	for {
		i := indexBreak(p[n:min(len(p), n+maxLine+1)])
		if i < 0 {
			return n
		}
		n += i + 1
	}
}

// indexBreak is the index of the first line break ("\n" or "\r") in b, or -1.
func indexBreak(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}

// lastBreak is the index of the last line break in b, or -1.
func lastBreak(b []byte) int {
	return max(bytes.LastIndexByte(b, '\n'), bytes.LastIndexByte(b, '\r'))
}

// Merge combines what was found in several streams of one trial, in the
// order they are given: for each signature (and for ReportLost), the last
// stream's line wins, as if the streams had been written one after the
// other (stderr, then stdout). It is nil when every one of ms is.
func Merge(ms ...*Matches) *Matches {
	var out *Matches
	for _, m := range ms {
		if m == nil {
			continue
		}
		if out == nil {
			out = &Matches{found: make([]found, len(signatures))}
		}
		for i, f := range m.found {
			if f.ok {
				out.found[i].line, out.found[i].ok = f.line, true
			}
			if f.errOK {
				out.found[i].errLine, out.found[i].errOK = f.errLine, true
			}
		}
		if m.reportLost != "" {
			out.reportLost = m.reportLost
		}
	}
	return out
}

// first returns the first signature in table order that matched, skipping
// those skip rejects; ok is false if none did.
func (m *Matches) first(skip func(*signature) bool) (sig *signature, line string, ok bool) {
	if m == nil {
		return nil, "", false
	}
	for i, f := range m.found {
		if f.ok && (skip == nil || !skip(&signatures[i])) {
			return &signatures[i], f.line, true
		}
	}
	return nil, "", false
}

// firstError is first over the lines in an error's form only.
func (m *Matches) firstError(skip func(*signature) bool) (sig *signature, line string, ok bool) {
	if m == nil {
		return nil, "", false
	}
	for i, f := range m.found {
		if f.errOK && (skip == nil || !skip(&signatures[i])) {
			return &signatures[i], f.errLine, true
		}
	}
	return nil, "", false
}
