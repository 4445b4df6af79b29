package report

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/batchfit/batchfit/internal/classify"
	"github.com/batchfit/batchfit/internal/record"
	"github.com/batchfit/batchfit/internal/search"
)

// scriptEnv makes the test binary play a scripted search on its stderr
// instead of running tests: the child that TestLiveInTmux runs in a real
// terminal. Its value is the pause between steps, e.g. "30ms" (or "700ms"
// to watch it by eye).
const scriptEnv = "BATCHFIT_LIVE_SCRIPT"

func TestMain(m *testing.M) {
	if pause := os.Getenv(scriptEnv); pause != "" {
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
	tty := isatty.IsTerminal(os.Stderr.Fd())
	p := NewProgress(os.Stderr, ProgressOptions{
		TTY: tty, Color: tty && os.Getenv("NO_COLOR") == "",
		Capacity: 80 << 30, Limit: 24 << 30, Simulated: true, GPU: "NVIDIA H100 80GB HBM3",
		Title: "batchfit demo", Confirm: 1,
	})
	for _, s := range scriptSteps() {
		time.Sleep(d)
		s(p)
	}
	p.Close()
	p.Close() // a second Close is harmless
	fmt.Println("largest batch size that runs: 282")
	return 0
}

// scriptSteps is a search on a 24 GiB limit: bracket 64..512, a model
// prediction refined by two trials side by side on two GPUs, a confirmation.
func scriptSteps() []func(Progress) {
	var steps []func(Progress)
	add := func(f func(Progress)) { steps = append(steps, f) }
	lo, hi := 0, 0
	n := 0
	phase := search.Phase("")
	event := func(k search.EventKind, sizes []int, pred float64) search.Event {
		return search.Event{Kind: k, Phase: phase, Lo: lo, Hi: hi, Sizes: sizes, Predicted: pred}
	}
	round := func(ph search.Phase, pred float64, trials ...record.Trial) {
		add(func(p Progress) {
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
			add(func(p Progress) {
				n++
				trials[i].N = n
				trials[i].Phase = string(ph)
				p.TrialStarted(n, trials[i].Size, []int{i})
			})
		}
		add(func(Progress) {}) // let the spinner turn
		for i := range trials {
			add(func(p Progress) {
				p.TrialDone(trials[i])
				p.Event(search.Event{Kind: search.EventObservation, Phase: phase, Lo: lo, Hi: hi})
			})
		}
	}
	bracket := func(l, h int) {
		add(func(p Progress) {
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
	add(func(p Progress) { p.Warn("trial 2: the adapter's report was unreadable (1 bad lines)") })
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
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the real-terminal check needs it (apt-get install tmux)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		noColor bool
		width   int
	}{{"color", false, 120}, {"no-color-80-columns", true, 80}} {
		t.Run(tc.name, func(t *testing.T) {
			screen, raw := runInTmux(t, exe, tc.noColor, tc.width)
			t.Logf("screen:\n%s", screen)
			for _, want := range []string{
				"batchfit demo · simulated NVIDIA H100 80GB HBM3 · 80.00 GiB · │ limit 24.00 GiB",
				"  #  size  outcome     peak memory                       step    time  phase",
				"  1    64  ok          ███▉░░░░░░░░░░░░│░░░   5.90 GiB   58ms   11.2s  bracket",
				"  4   512  oom         ███████████████▉│░░░  23.90 GiB      -    9.8s  bracket",
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
			// The answer follows the final frame directly.
			if !strings.Contains(screen, "bracket [282, 283]\nlargest batch size that runs: 282") {
				t.Errorf("the final frame is not right above the answer")
			}
			// Nothing wraps, even on 80 columns: every line is the start
			// of a line the script printed.
			for _, line := range strings.Split(screen, "\n") {
				if len([]rune(line)) >= tc.width {
					t.Errorf("a line fills the %d columns, so it may have wrapped: %q", tc.width, line)
				}
			}
			hasColor := strings.Contains(raw, "\x1b[3")
			if hasColor == tc.noColor {
				t.Errorf("colour escapes on the screen: %v, want %v", hasColor, !tc.noColor)
			}
		})
	}
}

// runInTmux plays the script in a private tmux server and returns the
// screen as text and with its escapes, once the child has exited.
func runInTmux(t *testing.T, exe string, noColor bool, width int) (screen, raw string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { tmux("kill-server") })
	env := fmt.Sprintf("env -u NO_COLOR %s=10ms TERM=xterm-256color", scriptEnv)
	if noColor {
		env += " NO_COLOR=1"
	}
	// After the child exits the shell reports its status and whether the
	// cursor is visible again, then waits so the pane can be read.
	cmd := fmt.Sprintf("%s %q; echo exit=$? cursor=$(tmux -S %q display -p '#{cursor_flag}'); sleep 60", env, exe, sock)
	if out, err := tmux("new-session", "-d", "-x", fmt.Sprint(width), "-y", "40", "sh", "-c", cmd); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := tmux("capture-pane", "-p")
		if err != nil {
			t.Fatalf("tmux capture-pane: %v: %s", err, out)
		}
		if strings.Contains(out, "exit=") {
			rawOut, _ := tmux("capture-pane", "-p", "-e")
			return trimLines(out), rawOut
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
