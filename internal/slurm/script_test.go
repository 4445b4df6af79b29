package slurm

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/trial"
)

// oddArgs are arguments no shell may interpret on their way to the trial.
var oddArgs = []string{
	"it's", `"double"`, "$HOME", "${PATH}", "$(touch pwned)", "`touch pwned`", "a b  c", "line1\nline2",
	"*", "~", "-e", "--", "", `back\slash`, ";exit 9", "| cat", "100%", "%j", "tab\there", "ünï", "!x",
}

// oddEnv are trial variables with values no shell may interpret, and names
// bash cannot export (module systems set BASH_FUNC_*%%).
var oddEnv = []string{
	"PATH=/usr/bin:/bin",
	"QUOTES=it's \"quoted\"",
	"DOLLAR=$HOME ${X} $(touch pwned) `touch pwned`",
	"NEWLINES=one\ntwo\n\nthree\n",
	"SPACES=  lead and trail  ",
	"EMPTY=",
	"EQUALS=a=b=c",
	"BACKSLASH=\\n\\\\",
	"BASH_FUNC_module%%=() {  echo module\n}",
	"dash-name=ok",
	"DUP=first",
	"DUP=second",
	"CUDA_VISIBLE_DEVICES=7",
	"SLURM_JOB_ID=from-the-submitter",
	"BIG=" + strings.Repeat("x'$\n", 25_000), // 100 KB, under Linux's 128 KiB a string
}

// runScriptLocally renders a script and runs it with bash here, with a
// made-up job environment, as slurmd would.
func runScriptLocally(t *testing.T, s script, jobEnv []string) dump {
	t.Helper()
	text, err := s.text()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "trial.sbatch")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/bash", path)
	cmd.Env = jobEnv
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("script failed: %v\n%s", err, text)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "pwned")); err == nil {
		t.Error("an argument or value was run as code")
	}
	return readDump(t, out)
}

// wantEnv is the environment a trial should see: the job's own variables,
// then the trial's except those the job owns, the last of duplicates
// winning (as os/exec does for a local trial).
func wantEnv(s script, jobEnv []string) []string {
	var want []string
	for _, kv := range jobEnv {
		name, _, _ := strings.Cut(kv, "=")
		if s.isOwned(name) {
			want = append(want, kv)
		}
	}
	last := map[string]string{}
	var order []string
	for _, kv := range s.env {
		name, _, _ := strings.Cut(kv, "=")
		if s.isOwned(name) {
			continue
		}
		if _, seen := last[name]; !seen {
			order = append(order, name)
		}
		last[name] = kv
	}
	for _, name := range order {
		want = append(want, last[name])
	}
	return want
}

func sameEnv(t *testing.T, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	// env(1) applies duplicate assignments in order; a later one replaces
	// an earlier one in place, so compare as sets.
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		for _, kv := range w {
			if !slices.Contains(g, kv) {
				t.Errorf("missing from the trial's environment: %.80q", kv)
			}
		}
		for _, kv := range g {
			if !slices.Contains(w, kv) {
				t.Errorf("unexpected in the trial's environment: %.80q", kv)
			}
		}
	}
}

func TestScriptPassesArgvEnvAndDirExactly(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	jobEnv := []string{
		"SLURM_JOB_ID=42", "SLURMD_NODENAME=node7", "ENVIRONMENT=BATCH", "TMPDIR=/tmp",
		"CUDA_VISIBLE_DEVICES=2,3", "GPU_DEVICE_ORDINAL=2,3",
		"STALE=from the login shell", "HOME=/home/elsewhere", "not-a-name=left over", "PATH=/usr/bin:/bin",
	}
	for _, gpus := range []bool{false, true} {
		t.Run(map[bool]string{false: "no gres", true: "gres"}[gpus], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "work dir 'quoted' $x")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			s := script{
				argv:   append([]string{exe, dumpCommand}, oddArgs...),
				env:    oddEnv,
				dir:    dir,
				gpus:   gpus,
				sbatch: []string{"sbatch", "--output=/logs/a\nb"},
			}
			d := runScriptLocally(t, s, jobEnv)
			if !slices.Equal(d.Args, append([]string{dumpCommand}, oddArgs...)) {
				t.Errorf("args = %q\nwant %q", d.Args, append([]string{dumpCommand}, oddArgs...))
			}
			if d.Dir != dir {
				t.Errorf("dir = %q, want %q", d.Dir, dir)
			}
			sameEnv(t, d.Env, wantEnv(s, jobEnv))
			cuda := ""
			for _, kv := range d.Env {
				if v, ok := strings.CutPrefix(kv, "CUDA_VISIBLE_DEVICES="); ok {
					cuda = v
				}
			}
			if want := map[bool]string{false: "7", true: "2,3"}[gpus]; cuda != want {
				t.Errorf("CUDA_VISIBLE_DEVICES = %q, want %q (the trial's without gres, Slurm's with)", cuda, want)
			}
		})
	}
}

func TestScriptMissingDirIsTheTrialsFailure(t *testing.T) {
	s := script{argv: []string{"/bin/true"}, env: []string{"PATH=/usr/bin:/bin"}, dir: "/nonexistent/dir"}
	text, err := s.text()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.sbatch")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/bash", path).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("err = %v, want exit status 1", err)
	}
	if !strings.Contains(string(out), "cannot enter the trial's working directory") {
		t.Errorf("output %q does not say why", out)
	}
}

func TestScriptRejects(t *testing.T) {
	for _, argv := range [][]string{nil, {""}, {"A=B"}} {
		if _, err := (script{argv: argv, dir: "/"}).text(); err == nil {
			t.Errorf("argv %q: no error", argv)
		}
	}
}

func TestSbatchArgs(t *testing.T) {
	e, err := New(Options{Commands: fakeSlurm(nil), Partition: "gpu", Account: "proj", Constraint: "a100", QOS: "short", GPUsPerTrial: 2,
		ExtraArgs: []string{"--mem=64G", "--exclude=n1"}})
	if err != nil {
		t.Fatal(err)
	}
	got := e.sbatchArgs(trial.Spec{Timeout: 90 * time.Second}, "batchfit-0123456789ab", "/work", "/logs/100%/t.out", "/logs/100%/t.err")
	want := []string{"--parsable", "--job-name=batchfit-0123456789ab", "--export=ALL", "--chdir=/work",
		"--output=/logs/100%%/t.out", "--open-mode=truncate", "--error=/logs/100%%/t.err",
		"--time=3", "--gres=gpu:2", "--partition=gpu", "--account=proj", "--constraint=a100", "--qos=short",
		"--mem=64G", "--exclude=n1"}
	if !slices.Equal(got, want) {
		t.Errorf("args\n got %q\nwant %q", got, want)
	}
}

func TestTimeLimit(t *testing.T) {
	for _, tc := range []struct {
		timeout, grace time.Duration
		want           int
	}{
		{time.Second, 0, 2},                    // 6 s -> 1 minute, +1
		{55 * time.Second, 5 * time.Second, 2}, // exactly a minute
		{56 * time.Second, 5 * time.Second, 3},
		{10 * time.Minute, time.Second, 12},
	} {
		if got := timeLimitMinutes(tc.timeout, tc.grace); got != tc.want {
			t.Errorf("timeLimitMinutes(%s, %s) = %d, want %d", tc.timeout, tc.grace, got, tc.want)
		}
	}
}

func TestComment(t *testing.T) {
	got := comment([]string{"sbatch", "--output=/logs/100%/t.out", "--comment=a b", "it's", "", "x\ny"})
	want := `sbatch --output=/logs/100%/t.out '--comment=a b' 'it'\''s' '' 'x\ny'`
	if got != want {
		t.Errorf("comment = %s\nwant      %s", got, want)
	}
}
