package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/batchfit/batchfit/internal/sim"
)

func TestMain(m *testing.M) {
	// Simulated trials re-execute this binary (os.Executable) in the child mode.
	if len(os.Args) > 1 && os.Args[1] == sim.ChildCommand {
		os.Exit(sim.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	testscript.Main(m, map[string]func(){
		"batchfit": func() {
			code := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			// The status command of the scripts reads the exit code back.
			if f := os.Getenv("BATCHFIT_TEST_STATUS_FILE"); f != "" {
				os.WriteFile(f, []byte(strconv.Itoa(code)), 0o644)
			}
			os.Exit(code)
		},
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("XDG_CACHE_HOME", env.WorkDir+"/cache")
			env.Setenv("BATCHFIT_TEST_STATUS_FILE", env.WorkDir+"/.status")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// status N: the last batchfit exited with code N.
			"status": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: status CODE")
				}
				got := strings.TrimSpace(ts.ReadFile(".status"))
				if (got == args[0]) == neg {
					ts.Fatalf("exit status %s, want %s", got, args[0])
				}
			},
		},
	})
}
