//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// pty opens a pseudo-terminal of cols columns and returns its terminal end.
func pty(t *testing.T, cols uint16) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("name the pseudo-terminal: %v", err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: cols}); err != nil {
		t.Skipf("size the pseudo-terminal: %v", err)
	}
	return tty
}

// On a terminal, --help wraps to its width; elsewhere to 80 columns (the
// help.txtar scenario).
func TestHelpWidth(t *testing.T) {
	t.Setenv("TERM", "xterm")
	if got := helpWidth(pty(t, 132)); got != 131 {
		t.Errorf("helpWidth(132-column terminal) = %d, want 131", got)
	}
	if got := helpWidth(pty(t, 20)); got != 80 {
		t.Errorf("helpWidth(20-column terminal) = %d, want 80: narrower is unreadable", got)
	}
	if got := helpWidth(&bytes.Buffer{}); got != 80 {
		t.Errorf("helpWidth(buffer) = %d, want 80", got)
	}
	t.Setenv("TERM", "dumb")
	if got := helpWidth(pty(t, 132)); got != 80 {
		t.Errorf("helpWidth(TERM=dumb) = %d, want 80", got)
	}
}

// The whole help on a wide terminal: flag texts use the width, and no line
// passes it.
func TestHelpOnTerminal(t *testing.T) {
	t.Setenv("TERM", "xterm")
	tty := pty(t, 140)
	out, err := os.CreateTemp(t.TempDir(), "help")
	if err != nil {
		t.Fatal(err)
	}
	// The width comes from the terminal; the text is read back from a file.
	root := newRootCommand(&streams{stdout: out, stderr: out})
	setHelpWidth(root, tty)
	root.SetOut(out)
	root.SetArgs([]string{"search", "--help"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(out.Name())
	longest := 0
	for _, line := range strings.Split(string(data), "\n") {
		longest = max(longest, len([]rune(line)))
	}
	if longest > 139 || longest <= 100 {
		t.Errorf("the longest help line on a 140-column terminal has %d columns, want 101 to 139", longest)
	}
}
