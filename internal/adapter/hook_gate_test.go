package adapter

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gateEnv is trial.GateEnv (the adapter does not import the trial runner).
const gateEnv = "BATCHFIT_GATE_FD"

// A trial started early waits at its gate when the program starts its
// framework on the GPU, and not before: torch's CUDA (through its C++ lazy
// start; real torch, CPU only) and JAX's backends (the stand-in). An opened
// gate lets it on, and the report says how long it waited; the gate's pipe
// ending unopened ends the trial there.
func TestHookGate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		framework string
		open      bool
		through   string
	}{
		{"torch", true, "through: AssertionError"}, // CPU torch refuses CUDA once through
		{"torch", false, ""},
		{"jax", true, "through"},
		{"jax", false, ""},
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
			hooked, report := hookedEnv(t, append(env, gateEnv+"=3"))
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
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
			if l := <-lines; l != "imported" {
				t.Fatalf("first line %q, want imported; stderr:\n%s", l, stderr.String())
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
			if err := cmd.Wait(); err != nil {
				t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
			}
			if !tc.open {
				if len(rest) != 0 {
					t.Errorf("past a gate never opened, it printed %q", rest)
				}
				return
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
