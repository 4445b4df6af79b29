package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchfit/batchfit/internal/record"
)

// TestJSONDocuments: what --json prints, run for real on the simulated
// GPU, is one document valid against docs/batchfit.schema.json, the same
// shape whatever happened.
func TestJSONDocuments(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	db := filepath.Join(t.TempDir(), "h.db")
	tests := []struct {
		name  string
		args  []string
		code  int
		runs  int
		check func(t *testing.T, runs []*record.Run)
	}{
		{"demo", []string{"demo", "--db", db, "--json"}, exitFound, 1, func(t *testing.T, runs []*record.Run) {
			r := runs[0]
			if r.Status != record.Found || r.Answer != 952 || len(r.Trials) == 0 {
				t.Errorf("demo: %s %d, %d trials", r.Status, r.Answer, len(r.Trials))
			}
		}},
		{"show", []string{"show", "--db", db, "--json", "latest"}, exitFound, 1, nil},
		{"history", []string{"history", "--db", db, "--json"}, exitFound, 1, nil},
		{"per GPU model", []string{"demo", "--no-db", "--json", "--sim-gpus", "2", "--gpus", "all", "--per-gpu-model", "--margin", "10%"}, exitFound, 1, nil},
		{"nothing fits", []string{"demo", "--no-db", "--json", "--min", "2000", "--max", "4000"}, exitNothingFits, 1, func(t *testing.T, runs []*record.Run) {
			if runs[0].Status != record.NothingFits {
				t.Errorf("status %s, want nothing_fits", runs[0].Status)
			}
		}},
		{"usage error", []string{"demo", "--json", "--sim-gpus", "0"}, exitUsage, 0, nil},
		{"unknown flag", []string{"search", "--json", "--bogus", "--", "true"}, exitUsage, 0, nil},
		{"no history", []string{"history", "--json", "--db", "/proc/no/h.db"}, exitError, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("batchfit %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), code, tc.code, stderr.String())
			}
			doc, err := parseDocument(stdout.Bytes())
			if err != nil {
				t.Fatalf("batchfit %s: %v\n%s", strings.Join(tc.args, " "), err, stdout.String())
			}
			if len(doc.Runs) != tc.runs {
				t.Errorf("%d runs, want %d", len(doc.Runs), tc.runs)
			}
			switch {
			case code == 0 && doc.Error != nil:
				t.Errorf("error %+v on exit 0", *doc.Error)
			case code != 0 && (doc.Error == nil || doc.Error.ExitCode != code || doc.Error.Message == ""):
				t.Errorf("error %+v, want one with exit code %d", doc.Error, code)
			}
			if tc.check != nil {
				tc.check(t, doc.Runs)
			}
		})
	}
}

// TestSchemaRefuses: the schema check is not a formality.
func TestSchemaRefuses(t *testing.T) {
	for _, doc := range []string{
		`{"schema_version": 1, "runs": [{}], "doctor": null, "error": null}`,
		`{"schema_version": 1, "runs": [], "error": null}`,
		`{"schema_version": 1, "runs": [], "doctor": null, "error": {"message": "x", "exit_code": 1}}`,
		`{"schema_version": 1, "runs": [], "doctor": null, "error": null}` + "\n{}",
	} {
		if _, err := parseDocument([]byte(doc)); err == nil {
			t.Errorf("%s passed", doc)
		}
	}
}

func TestJSONRequested(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"search", "--json", "--", "x"}, true},
		{[]string{"search", "--bogus", "--json=true"}, true},
		{[]string{"search", "--json=false", "--", "x"}, false},
		{[]string{"search", "--", "python", "t.py", "--json"}, false},
		{[]string{"search", "--jsonx"}, false},
		{[]string{"demo"}, false},
	} {
		if got := jsonRequested(tc.args); got != tc.want {
			t.Errorf("jsonRequested(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
