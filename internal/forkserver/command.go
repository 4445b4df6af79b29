package forkserver

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/batchfit/batchfit/internal/adapter"
	"github.com/batchfit/batchfit/internal/trial"
)

// pythonName matches the interpreters the server can stand in for: python,
// python3, python3.11 (the server checks it runs the same file).
var pythonName = regexp.MustCompile(`^python(\d+(\.\d+)?)?$`)

// Forkable reports whether argv is a plain Python program the server can
// run as the interpreter would: `python script.py args` or
// `python -m module args`, nothing else. Interpreter options (-u, -O, -X,
// -W, -I, -c) change how the interpreter starts, which a fork cannot redo;
// launchers (torchrun, accelerate, a shell script) start other processes.
// Such commands run as fresh processes.
func Forkable(argv []string, dir string) bool {
	if len(argv) < 2 || !pythonName.MatchString(filepath.Base(argv[0])) {
		return false
	}
	if argv[1] == "-m" {
		return len(argv) >= 3 && argv[2] != "" && !strings.HasPrefix(argv[2], "-")
	}
	script := argv[1]
	if script == "" || strings.HasPrefix(script, "-") {
		return false
	}
	if !filepath.IsAbs(script) {
		script = filepath.Join(dir, script)
	}
	// A directory or zip archive with __main__.py runs through runpy's
	// other path; keep those fresh.
	fi, err := os.Stat(script)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	ext := filepath.Ext(script)
	return ext != ".zip" && ext != ".pyz"
}

// perTrialEnv are the variables that differ between trials of one search
// (batchfit sets them for each): the server starts without them, and a
// trial may differ from the server only in them. CUDA's are read when CUDA
// starts, in the child; the cookie must not be the server's, or the end of
// a trial would take the server for one of its processes.
var perTrialEnv = []string{
	"BATCHFIT_BATCH_SIZE", "BATCHFIT_STEPS", "BATCHFIT_TRIAL", "BATCHFIT_REPORT",
	"BATCHFIT_SOAK", adapter.WorstCaseEnv, "BATCHFIT_TRIAL_COOKIE", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", adapter.CPUThreadsEnv,
}

// serverEnv is env without the per-trial variables, sorted: the server's
// environment, and the key a trial must match to be forked from it. The
// cap in torch's allocator configuration (per_process_memory_fraction,
// --memory-limit's, fixed only after the first trial under a whole-process
// limit) is a trial's own too: torch reads it when CUDA starts, also in a
// child forked after `import torch` (docs/design/preloading.md,
// bench/probes/alloc_conf_lazy.py), and a trial whose allocator kept another cap than its own is
// refused (adapter.CapNotHeld), whatever a torch version does. The rest of
// that variable stays the server's: torch picks its allocator backend
// (backend:cudaMallocAsync) when it is imported.
func serverEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case slices.Contains(perTrialEnv, k):
		case k == adapter.AllocConfEnv:
			if rest := adapter.WithoutAllocFraction(v); rest != "" {
				out = append(out, k+"="+rest)
			}
		default:
			out = append(out, kv)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// key is what a server was started for: the interpreter file, the working
// directory and the environment. A trial with another key runs fresh.
type key struct {
	argv0  string // as the command names it: the server runs as it, so sys.executable is the same
	path   string // where argv0 is found
	python string // the file, symlinks resolved
	dir    string
	env    string
}

// envOf is the environment spec's trial gets.
func envOf(spec trial.Spec) []string {
	if spec.Env == nil {
		return os.Environ()
	}
	return spec.Env
}

// keyOf is spec's key; ok is false when spec cannot be forked at all.
func keyOf(spec trial.Spec) (k key, ok bool) {
	env := envOf(spec)
	if !Forkable(spec.Argv, spec.Dir) {
		return key{}, false
	}
	path, err := trial.LookPath(spec.Argv[0], spec.Dir, env)
	if err != nil {
		return key{}, false
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(spec.Dir, path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return key{}, false
	}
	return key{argv0: spec.Argv[0], path: path, python: real, dir: spec.Dir, env: strings.Join(serverEnv(env), "\x00")}, true
}
