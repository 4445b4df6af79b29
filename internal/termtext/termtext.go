// Package termtext makes text that batchfit did not write (a trial's output,
// an exception from the adapter) safe to show on a terminal: escape
// sequences and control characters removed, invalid UTF-8 replaced, and
// lines bounded. Every place that shows such text goes through it.
package termtext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Width is the longest line, in runes, that a tail shows; longer lines are
// cut with a mark that says how much was left out.
const Width = 300

// Clean returns s without terminal control sequences: ANSI CSI and OSC
// sequences (and the other ESC and C1 sequences), and every C0 and C1
// control character except newline and tab. A carriage return that is not
// part of CRLF starts its line again, as on a terminal (progress bars), and
// each run of invalid UTF-8 becomes U+FFFD. Bidirectional overrides, which
// reorder what follows them, are removed too.
func Clean(s string) string {
	if isPlain(s) {
		return s
	}
	b := make([]byte, 0, len(s))
	lineStart := 0     // where the current line starts in b
	overwrite := false // a lone \r: the next text replaces the line
	invalid := false   // the last thing written was U+FFFD for invalid bytes
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			if !invalid {
				b = utf8.AppendRune(b, utf8.RuneError)
				invalid = true
			}
			i++
			continue
		}
		invalid = false
		switch {
		case r == '\n':
			b = append(b, '\n')
			lineStart, overwrite = len(b), false
			i += size
			continue
		case r == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++ // CRLF is a newline
				continue
			}
			overwrite = true
			i++
			continue
		case r == 0x1b:
			i = skipEscape(s, i+1)
			continue
		case r == 0x9b: // C1 CSI
			i = skipCSI(s, i+size)
			continue
		case r == 0x90 || r == 0x98 || r == 0x9d || r == 0x9e || r == 0x9f: // C1 DCS, SOS, OSC, PM, APC
			i = skipString(s, i+size)
			continue
		case r != '\t' && (r < 0x20 || (r >= 0x7f && r <= 0x9f)) || isBidi(r):
			i += size
			continue
		}
		if overwrite {
			b, overwrite = b[:lineStart], false
		}
		b = append(b, s[i:i+size]...)
		i += size
	}
	return string(b)
}

// isPlain says whether s is printable ASCII, newlines and tabs only, which
// Clean returns as it is.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

func isBidi(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// skipEscape returns the index after the escape sequence whose ESC was just
// before i.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return skipCSI(s, i+1)
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC
		return skipString(s, i+1)
	}
	// ESC, intermediate bytes, one final byte.
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipCSI returns the index after a CSI sequence's parameters and final
// byte, from just after its introducer. A byte that cannot be part of the
// sequence ends it, and is kept.
func skipCSI(s string, i int) int {
	for i < len(s) {
		c := s[i]
		switch {
		case c >= 0x20 && c <= 0x3f:
			i++
		case c >= 0x40 && c <= 0x7e:
			return i + 1
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after a control string (OSC, DCS ...) that
// ends with BEL, ESC \ or the C1 ST, from just after its introducer. An
// unterminated string runs to the end of its line: a newline ends it and
// is kept, so a broken sequence cannot swallow the rest of the output.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\':
			return i + 2
		case s[i] == 0xc2 && i+1 < len(s) && s[i+1] == 0x9c:
			return i + 2
		case s[i] == '\n':
			return i
		}
		i++
	}
	return i
}

// Clip shortens s to at most n runes, marking the cut with "…"; n <= 0
// leaves s whole.
func Clip(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	count := 0
	for i := range s {
		if count == n-1 {
			if _, size := utf8.DecodeRuneInString(s[i:]); i+size == len(s) {
				return s
			}
			return s[:i] + "…"
		}
		count++
	}
	return s
}

// Line returns s cleaned (Clean) as one line: newlines and tabs become
// spaces, the ends are trimmed, and it is clipped to n runes (n <= 0: not
// clipped).
func Line(s string, n int) string {
	s = Clean(s)
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		return r
	}, s))
	return Clip(s, n)
}

// Tail returns the last n lines of s (all of them when n <= 0), cleaned,
// without trailing empty lines, each cut to width runes (Width when width
// <= 0) with a mark that says how many bytes were cut.
func Tail(s string, n, width int) []string {
	if width <= 0 {
		width = Width
	}
	s = strings.TrimRight(Clean(s), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if c := Clip(l, width); len(c) != len(l) {
			kept := len(c) - len("…")
			lines[i] = c + " (" + strconv.Itoa(len(l)-kept) + " more bytes)"
		}
	}
	return lines
}
