package adapter

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gateEnv is trial.GateEnv (the adapter does not import the trial runner),
// whose value is FD:INODE.
const gateEnv = "BATCHFIT_GATE_FD"

// gatePipe is a trial's gate: the pipe's ends, closed when the test ends,
// and the inode that names it.
func gatePipe(t *testing.T) (r, w *os.File, ino uint64) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	var st syscall.Stat_t
	if err := syscall.Fstat(int(r.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return r, w, st.Ino
}

// A trial started early waits at its gate when the program starts its
// framework on the GPU, and not before: torch's CUDA (through its C++ lazy
// start; real torch, CPU only) and JAX's backends (the stand-in). Until
// then torch's CPU work runs on one thread. An opened gate lets it on, on
// the threads the program asked for, and the report says how long it
// waited; the gate's pipe ending unopened ends the trial there.
func TestHookGate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		framework string
		open      bool
		imported  string
		through   string
	}{
		// torch runs on one thread until through, then on the program's 3;
		// CPU torch refuses CUDA once through.
		{"torch", true, "imported 1", "through: AssertionError 3"},
		{"torch", false, "imported 1", ""},
		{"jax", true, "imported", "through"},
		{"jax", false, "imported", ""},
	} {
		name := tc.framework + map[bool]string{true: " opened", false: " never opened"}[tc.open]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var env []string
			py := findPython(t, tc.framework == "torch")
			if tc.framework == "jax" {
				fake, err := filepath.Abs(testdata("fakejax"))
				if err != nil {
					t.Fatal(err)
				}
				env = append(env, "PYTHONPATH="+fake)
			}
			r, w, ino := gatePipe(t)
			hooked, report := hookedEnv(t, append(env, fmt.Sprintf("%s=3:%d", gateEnv, ino)))
			cmd := exec.Command(py, testdata("gatetrain.py"), tc.framework)
			cmd.Env, cmd.ExtraFiles = hooked, []*os.File{r}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			r.Close()
			lines := make(chan string, 8)
			go func() {
				defer close(lines)
				s := bufio.NewScanner(out)
				for s.Scan() {
					lines <- s.Text()
				}
			}()
			if l := <-lines; l != tc.imported {
				t.Fatalf("first line %q, want %q; stderr:\n%s", l, tc.imported, stderr.String())
			}
			select {
			case l := <-lines:
				t.Fatalf("%q before the gate opened", l)
			case <-time.After(500 * time.Millisecond):
			}
			if tc.open {
				w.Write([]byte{'1'})
			}
			w.Close()
			var rest []string
			for l := range lines {
				rest = append(rest, l)
			}
			err = cmd.Wait()
			if !tc.open {
				// Not 0, which would read as a trial that ran.
				if code := cmd.ProcessState.ExitCode(); code != 75 || len(rest) != 0 || !strings.Contains(stderr.String(), "gate closed") {
					t.Errorf("past a gate never opened: exit %d, printed %q, stderr %q; want exit 75 at the gate", code, rest, stderr.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
			}
			// (The stand-in JAX says at exit whether its backend started.)
			if want := []string{tc.through, "done"}; len(rest) < 2 || strings.Join(rest[:2], "\n") != strings.Join(want, "\n") {
				t.Errorf("after the gate: %q, want %q; stderr:\n%s", rest, want, stderr.String())
			}
			events, _, err := Read(report)
			if err != nil || len(events) != 1 || events[0].GateWait < 0.4 {
				t.Errorf("report: %+v (%v), want one exit event with a gate wait of 0.5 s", events, err)
			}
		})
	}
}

// A descriptor that is not the gate's pipe (a program closed the inherited
// one and opened another there: the inode differs) is no gate: the trial
// runs on.
func TestHookGateChecksThePipe(t *testing.T) {
	t.Parallel()
	py := findPython(t, false)
	fake, err := filepath.Abs(testdata("fakejax"))
	if err != nil {
		t.Fatal(err)
	}
	r, _, ino := gatePipe(t)
	hooked, _ := hookedEnv(t, []string{"PYTHONPATH=" + fake, fmt.Sprintf("%s=3:%d", gateEnv, ino+1)})
	cmd := exec.Command(py, testdata("gatetrain.py"), "jax")
	cmd.Env, cmd.ExtraFiles = hooked, []*os.File{r}
	done := make(chan error, 1)
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "through\ndone\n") {
			t.Errorf("exit %v, stdout %q: want it through without a gate", err, out.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("it waited at a descriptor that is not its gate")
	}
}

// torch imported once the trial is through its gate (by a JAX program, a
// lazy import) keeps the threads it would have had: the one-thread rule is
// for the wait only.
func TestHookGateLeavesLaterTorchAlone(t *testing.T) {
	t.Parallel()
	py := findPython(t, true)
	fake, err := filepath.Abs(testdata("fakejax"))
	if err != nil {
		t.Fatal(err)
	}
	threads := func(gated bool) string {
		env := []string{"PYTHONPATH=" + fake}
		var extra []*os.File
		if gated {
			r, w, ino := gatePipe(t)
			w.Write([]byte("1"))
			env, extra = append(env, fmt.Sprintf("%s=3:%d", gateEnv, ino)), []*os.File{r}
		}
		hooked, _ := hookedEnv(t, env)
		cmd := exec.Command(py, testdata("gatetrain.py"), "jax-then-torch")
		cmd.Env, cmd.ExtraFiles = hooked, extra
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gated %v: %v", gated, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "torch threads") {
				return l
			}
		}
		t.Fatalf("gated %v: no thread count in %q", gated, out)
		return ""
	}
	if with, without := threads(true), threads(false); with != without {
		t.Errorf("through a gate: %q, without one: %q", with, without)
	}
}
