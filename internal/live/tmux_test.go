package live

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/runner"
	"github.com/batchfit/batchfit/internal/search"
	"github.com/batchfit/batchfit/internal/testutil"
)

// scriptEnv makes the test binary play a scripted search on its stderr
// instead of running tests: the child that TestLiveInTmux runs in a real
// terminal. Its value is the pause between steps, e.g. "30ms" (or "700ms"
// to watch it by eye), or "interrupt": start a trial and wait for Ctrl-C.
const scriptEnv = "BATCHFIT_LIVE_SCRIPT"

func TestMain(m *testing.M) {
	switch pause := os.Getenv(scriptEnv); pause {
	case "":
	case "interrupt":
		os.Exit(playInterrupted())
	default:
		os.Exit(playScript(pause))
	}
	os.Exit(m.Run())
}

// playScript drives a Progress on stderr the way batchfit search does, as
// the CLI would set it up, then prints an answer on stdout after Close.
func playScript(pause string) int {
	d, err := time.ParseDuration(pause)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	p := scriptProgress()
	for _, s := range scriptSteps() {
		time.Sleep(d)
		s(p)
	}
	p.Close()
	p.Close() // a second Close is harmless
	fmt.Println("largest batch size that runs: 282")
	return 0
}

// scriptProgress is the Progress as the CLI sets it up on stderr.
func scriptProgress() runner.Progress {
	tty := isatty.IsTerminal(os.Stderr.Fd())
	opts := Options{
		Color: tty && os.Getenv("NO_COLOR") == "", Capacity: 80 << 30, Limit: 24 << 30, Simulated: true, GPU: "NVIDIA H100 80GB HBM3",
		Title: "batchfit demo", Confirm: 1,
	}
	if tty {
		return NewTTY(os.Stderr, opts)
	}
	return NewPlain(os.Stderr, opts)
}

// playInterrupted starts a trial and waits for Ctrl-C the way batchfit does,
// through its own signal handler: the display must not take the key or the
// signal. Then the trial ends canceled, the display closes and the process
// exits 130.
func playInterrupted() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	p := scriptProgress()
	p.Event(search.Event{Kind: search.EventPhase, Phase: search.PhaseBracket})
	p.Event(search.Event{Kind: search.EventPlan, Phase: search.PhaseBracket, Sizes: []int{64}})
	p.TrialStarted(1, 64, []int{0})
	// Tell the test the display is up: it sends Ctrl-C once it sees this.
	p.Warn("waiting for ctrl-c")
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Second):
		p.Close()
		fmt.Println("no interrupt came")
		return 1
	}
	p.TrialDone(record.Trial{N: 1, Size: 64, Outcome: classify.Canceled, Seconds: 1.5, Phase: "bracket"})
	p.Close()
	fmt.Println("interrupted")
	return 130
}

// scriptSteps is a search on a 24 GiB limit: bracket 64..512, a model
// prediction refined by two trials side by side on two GPUs, a confirmation.
func scriptSteps() []func(runner.Progress) {
	var steps []func(runner.Progress)
	add := func(f func(runner.Progress)) { steps = append(steps, f) }
	lo, hi := 0, 0
	n := 0
	phase := search.Phase("")
	event := func(k search.EventKind, sizes []int, pred float64) search.Event {
		return search.Event{Kind: k, Phase: phase, Lo: lo, Hi: hi, Sizes: sizes, Predicted: pred}
	}
	round := func(ph search.Phase, pred float64, trials ...record.Trial) {
		add(func(p runner.Progress) {
			if phase != ph {
				phase = ph
				p.Event(event(search.EventPhase, nil, 0))
			}
			var sizes []int
			for _, t := range trials {
				sizes = append(sizes, t.Size)
			}
			p.Event(event(search.EventPlan, sizes, pred))
		})
		for i := range trials {
			add(func(p runner.Progress) {
				n++
				trials[i].N = n
				trials[i].Phase = string(ph)
				p.TrialStarted(n, trials[i].Size, []int{i})
			})
		}
		add(func(runner.Progress) {}) // let the spinner turn
		for i := range trials {
			add(func(p runner.Progress) {
				p.TrialDone(trials[i])
				p.Event(search.Event{Kind: search.EventObservation, Phase: phase, Lo: lo, Hi: hi})
			})
		}
	}
	bracket := func(l, h int) {
		add(func(p runner.Progress) {
			lo, hi = l, h
			p.Event(event(search.EventBracket, nil, 0))
		})
	}
	ok := func(size int, gib float64, secs float64) record.Trial {
		return record.Trial{Size: size, Outcome: classify.OK, Seconds: secs, Allocated: uint64(gib * (1 << 30)),
			StepTimes: []float64{0.9, float64(size) / 1100, float64(size) / 1100}}
	}
	oom := func(size int, gib float64, secs float64) record.Trial {
		return record.Trial{Size: size, Outcome: classify.OOM, Seconds: secs, Allocated: uint64(gib * (1 << 30)),
			Reason: "CUDA out of memory. Tried to allocate 1.53 GiB"}
	}
	round(search.PhaseBracket, 0, ok(64, 5.9, 11.2))
	bracket(64, 0)
	round(search.PhaseBracket, 0, ok(128, 10.7, 11.9))
	bracket(128, 0)
	add(func(p runner.Progress) { p.Warn("trial 2: the adapter's report was unreadable (1 bad lines)") })
	round(search.PhaseBracket, 0, ok(256, 21.5, 13.4))
	bracket(256, 0)
	round(search.PhaseBracket, 0, oom(512, 23.9, 9.8))
	bracket(256, 512)
	round(search.PhaseRefine, 282.7, ok(282, 23.6, 14.0), oom(283, 23.9, 10.1))
	bracket(282, 283)
	round(search.PhaseConfirm, 0, ok(282, 23.6, 13.9))
	return steps
}

// TestLiveInTmux runs the live display in a real terminal (tmux, 120×40, and
// 80 columns without colour) and reads the screen: the rows are there and aligned, the final frame
// stays after Close, the cursor is shown again and the process exits 0.
func TestLiveInTmux(t *testing.T) {
	exe := needTmux(t)
	for _, tc := range []struct {
		name    string
		noColor bool
		width   int
	}{{"color", false, 120}, {"no-color-80-columns", true, 80}} {
		t.Run(tc.name, func(t *testing.T) {
			screen, stream := runInTmux(t, exe, "10ms", tc.noColor, tc.width)
			t.Logf("screen:\n%s", screen)
			for _, want := range []string{
				"batchfit demo · simulated NVIDIA H100 80GB HBM3 · 80.00 GiB · │ limit 24.00 GiB",
				"  #  size  outcome     peak memory                       step    time  phase",
				"  1    64  ok          ███▉░░░░░░░░░░░░│░░░   5.90 GiB   58ms   11.2s  bracket",
				"  4   512  oom         ███████████████▉│░░░ >23.90 GiB      -    9.8s  bracket",
				"  5   282  ok          ███████████████▊│░░░  23.60 GiB  256ms   14.0s  refine",
				"warning: trial 2: the adapter's report was unreadable (1 bad lines)",
				"7 trials in ",
				"bracket [282, 283]",
				"largest batch size that runs: 282",
				"exit=0 cursor=1",
			} {
				if !strings.Contains(screen, want) {
					t.Errorf("the screen lacks %q", want)
				}
			}
			// Each trial once: rows are printed once, and the live area
			// left nothing behind (no spinner, no "running").
			for _, size := range []string{"  64  ok", " 128  ok", " 256  ok", " 512  oom", " 283  oom"} {
				if c := strings.Count(screen, size); c != 1 {
					t.Errorf("%q is on the screen %d times, want once", size, c)
				}
			}
			if strings.Contains(screen, "running") || strings.ContainsAny(screen, strings.Join(spinner, "")) {
				t.Errorf("the live area's running rows stayed on the screen")
			}
			// The answer follows the final frame after one blank line.
			if !strings.Contains(screen, "bracket [282, 283]\n\nlargest batch size that runs: 282") {
				t.Errorf("the final frame is not right above the answer")
			}
			// Nothing wraps, even on 80 columns: every line is the start
			// of a line the script printed.
			for _, line := range strings.Split(screen, "\n") {
				if len([]rune(line)) >= tc.width {
					t.Errorf("a line fills the %d columns, so it may have wrapped: %q", tc.width, line)
				}
			}
			// NO_COLOR: no styles at all (the Ascii profile drops bold and
			// faint too); the cursor moves are the display's, not colour.
			hasColor := ansi.MatchString(stream)
			if hasColor == tc.noColor {
				t.Errorf("colour escapes written: %v, want %v", hasColor, !tc.noColor)
			}
		})
	}
}

// needTmux skips t outside the full run or without tmux, and returns this
// test binary, which runInTmux runs in the terminal.
func needTmux(t *testing.T) string {
	t.Helper()
	testutil.NeedsFull(t, "tmux")
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the real-terminal check needs it (apt-get install tmux)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// runInTmux plays the script in a private tmux server and returns, once the
// child has exited, the screen with its scrollback as text, with a last line
// "exit=STATUS cursor=VISIBLE" added, and everything the child wrote, escapes
// included. A shell starts the child as an interactive one would, in the
// foreground, so Ctrl-C goes to both; the shell traps it to outlive the
// child and write its exit status. keys come in pairs: text to wait for on
// the screen, then the keys to send when it shows.
func runInTmux(t *testing.T, exe, script string, noColor bool, width int, keys ...string) (screen, stream string) {
	t.Helper()
	dir := t.TempDir()
	sock, conf := filepath.Join(dir, "tmux.sock"), filepath.Join(dir, "tmux.conf")
	pipe, status := filepath.Join(dir, "stream"), filepath.Join(dir, "status")
	// The pane stays after the shell exits, so it can be read.
	if err := os.WriteFile(conf, []byte("set -g remain-on-exit on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The server, and so the pane, takes its environment from the first
	// client: this one's, without NO_COLOR unless the case sets it.
	env := []string{scriptEnv + "=" + script, "TERM=xterm-256color"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "TMUX=") {
			env = append(env, kv)
		}
	}
	if noColor {
		env = append(env, "NO_COLOR=1")
	}
	tmux := func(args ...string) (string, error) {
		cmd := exec.Command("tmux", append([]string{"-S", sock, "-f", conf}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { tmux("kill-server") })
	// A trap that runs a command, unlike one that ignores the signal, is
	// not inherited: the child starts with SIGINT as it would from a
	// shell. The sleep lets pipe-pane be in place before the child writes.
	shell := fmt.Sprintf("trap true INT; sleep 0.2; %q; echo $? > %q", exe, status)
	if out, err := tmux("new-session", "-d", "-x", fmt.Sprint(width), "-y", "40", shell, ";",
		"pipe-pane", "-o", fmt.Sprintf("cat > %q", pipe)); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := tmux("capture-pane", "-p")
		if err != nil {
			t.Fatalf("tmux capture-pane: %v: %s", err, out)
		}
		if len(keys) >= 2 && strings.Contains(out, keys[0]) {
			if out, err := tmux("send-keys", keys[1]); err != nil {
				t.Fatalf("tmux send-keys: %v: %s", err, out)
			}
			keys = keys[2:]
		}
		// The pane is dead once the shell has exited and tmux has read
		// all it wrote.
		dead, err := tmux("display", "-p", "#{pane_dead}")
		if err != nil {
			t.Fatalf("tmux display: %v: %s", err, dead)
		}
		if strings.TrimSpace(dead) == "1" {
			code, err := os.ReadFile(status)
			if err != nil {
				t.Fatalf("the shell wrote no exit status: %v", err)
			}
			out, _ = tmux("capture-pane", "-p", "-S", "-")
			// tmux's own note under a dead pane is not the program's.
			if i := strings.Index(out, "\nPane is dead"); i >= 0 {
				out = out[:i]
			}
			b, err := os.ReadFile(pipe)
			if err != nil {
				t.Fatal(err)
			}
			// tmux reports a dead pane's cursor as hidden whatever the
			// program did, so read what it wrote last: show or hide.
			stream = string(b)
			cursor := 0
			if strings.LastIndex(stream, "\x1b[?25h") > strings.LastIndex(stream, "\x1b[?25l") {
				cursor = 1
			}
			return trimLines(out) + fmt.Sprintf("\nexit=%s cursor=%d", strings.TrimSpace(string(code)), cursor), stream
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scripted search did not finish in 30s; the screen:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// trimLines drops trailing spaces and blank lines.
func trimLines(s string) string {
	var b bytes.Buffer
	for _, line := range strings.Split(s, "\n") {
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// TestLiveInTmuxCtrlC presses Ctrl-C in a real terminal while a trial runs:
// the SIGINT reaches the program's own handler (the display neither reads
// the key nor catches the signal), the final frame stays, the terminal is
// restored and the exit status is the program's.
func TestLiveInTmuxCtrlC(t *testing.T) {
	exe := needTmux(t)
	screen, _ := runInTmux(t, exe, "interrupt", false, 120, "waiting for ctrl-c", "C-c")
	t.Logf("screen:\n%s", screen)
	for _, want := range []string{
		"warning: waiting for ctrl-c",
		"  1    64  canceled",
		"1 trial in ",
		"interrupted\nexit=130 cursor=1",
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("the screen lacks %q", want)
		}
	}
	if strings.Contains(screen, "running") {
		t.Errorf("the running row stayed on the screen")
	}
}
