package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "hello\tworld\n", "hello\tworld\n"},
		{"csi color", "\x1b[31mred\x1b[0m", "red"},
		{"csi cursor", "a\x1b[2K\x1b[1;1Hb", "ab"},
		{"csi private", "\x1b[?25lhidden\x1b[?25h", "hidden"},
		{"csi unterminated", "x\x1b[31", "x"},
		{"osc bel", "\x1b]0;title\x07text", "text"},
		{"osc st", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"osc c1 st", "\x1b]0;title\u009ctext", "text"},
		{"osc unterminated stops at newline", "\x1b]0;title\nnext", "\nnext"},
		{"dcs", "\x1bPq#0;2;0;0;0\x1b\\after", "after"},
		{"two-byte escape", "\x1bcreset\x1b(Bdone", "resetdone"},
		{"c1 csi", "\u009b31mred", "red"},
		{"c1 osc", "\u009d0;t\u0007x", "x"},
		{"c1 other", "a\u0085b\u0084c", "abc"},
		{"c0", "bell\x07 nul\x00 bs\x08 del\x7f", "bell nul bs del"},
		{"crlf", "one\r\ntwo\r\n", "one\ntwo\n"},
		{"carriage return overwrites", "10%\r50%\r100%\ndone", "100%\ndone"},
		{"trailing carriage return keeps line", "last\r", "last"},
		{"invalid utf-8", "a\xff\xfeb\xc3", "a\ufffdb\ufffd"},
		{"valid utf-8", "日本 ✓ é", "日本 ✓ é"},
		{"bidi override", "a\u202eevil\u202cb", "aevilb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Clean(tc.in); got != tc.want {
				t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCleanLeavesNoControls(t *testing.T) {
	var b strings.Builder
	for c := 0; c < 256; c++ {
		b.WriteByte(byte(c))
		b.WriteString("x")
	}
	for r := rune(0x80); r < 0xa0; r++ {
		b.WriteRune(r)
		b.WriteString("y")
	}
	got := Clean(b.String())
	if !utf8.ValidString(got) {
		t.Fatalf("Clean left invalid UTF-8: %q", got)
	}
	for _, r := range got {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) {
			t.Fatalf("Clean left control %U in %q", r, got)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"too long", 5, "too …"},
		{"日本語テキスト", 4, "日本語…"},
		{"日本語", 3, "日本語"},
		{"anything", 0, "anything"},
	} {
		if got := Clip(tc.in, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	got := Line("  \x1b[1mTraceback\x1b[0m\n\tline two  ", 0)
	if want := "Traceback  line two"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	if got := Line(strings.Repeat("a", 1000), 50); utf8.RuneCountInString(got) != 50 || !strings.HasSuffix(got, "…") {
		t.Errorf("Line of 1000 runes clipped to 50 = %q", got)
	}
}

func TestTail(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	in := "first\n\x1b[31mred\x1b[0m\x07\n\xff\xfe binary\n" + huge + "\nTraceback: boom\n\n"
	got := Tail(in, 3, 0)
	if len(got) != 3 {
		t.Fatalf("Tail = %d lines, want 3: %q", len(got), got)
	}
	if got[0] != "\ufffd binary" {
		t.Errorf("line 1 = %q", got[0])
	}
	if n := utf8.RuneCountInString(got[1]); n > Width+40 {
		t.Errorf("a 1 MiB line came back as %d runes", n)
	}
	if want := strings.Repeat("x", Width-1) + "… (" + "1048277" + " more bytes)"; got[1] != want {
		t.Errorf("long line = %q…", got[1][:40])
	}
	if got[2] != "Traceback: boom" {
		t.Errorf("line 3 = %q", got[2])
	}
	if all := Tail(in, 0, 10); len(all) != 5 || all[1] != "red" {
		t.Errorf("Tail(all) = %q", all)
	}
	if got := Tail("\n\n", 5, 0); got != nil {
		t.Errorf("Tail of blank output = %q, want nil", got)
	}
}

func BenchmarkCleanLongLine(b *testing.B) {
	s := strings.Repeat("\x1b[31mred\x1b[0m text ", 1<<16)
	for b.Loop() {
		Clean(s)
	}
}
