package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/spf13/pflag"
)

var updatePythonFlags = flag.Bool("update", false, "rewrite python/batchfit/flags.json")

// pythonFlags is the Python API's copy of the flags of the commands it runs.
const pythonFlags = "../../python/batchfit/flags.json"

// TestPythonFlags: python/batchfit/flags.json, from which batchfit.search,
// demo and doctor check each keyword option against the flag it becomes,
// names every flag of those commands with its pflag type; -update rewrites
// it.
func TestPythonFlags(t *testing.T) {
	root := newRootCommand(&streams{})
	table := map[string]map[string]string{}
	for _, name := range []string{"search", "demo", "doctor"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		flags := map[string]string{}
		cmd.Flags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = f.Value.Type() })
		table[name] = flags
	}
	want, err := json.MarshalIndent(table, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *updatePythonFlags {
		if err := os.WriteFile(pythonFlags, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(pythonFlags)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the flags of search, demo and doctor; go test ./cmd/batchfit -run TestPythonFlags -update rewrites it. Want:\n%s", pythonFlags, want)
	}
}
