package adapter

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// IsPython reports whether argv runs a Python interpreter, so that the trial
// can expect an exit event from the hook (a Python trial without one did not
// reach a normal interpreter exit). The rule, in order:
//
//   - argv[0]'s base name is an interpreter: python, python3, python3.12,
//     python3.13t, pypy, pypy3, pypy3.10, …;
//   - argv[0] is env: the first argument after its options and NAME=VALUE
//     assignments is judged by this rule;
//   - argv[0] is an environment runner's "run" (uv, conda, mamba, micromamba,
//     poetry, pipenv, pdm, pixi, hatch): some later argument is an interpreter,
//     a known Python launcher (torchrun, accelerate, deepspeed, lightning) or
//     a .py file, since its options cannot be told from the command without
//     knowing each tool's flags;
//   - otherwise argv[0] is looked up on PATH and its first line is a "#!"
//     line naming python or pypy, as for the console scripts torchrun,
//     accelerate, deepspeed and lightning (and pip's two-line form,
//     "#!/bin/sh" then an exec of python, for long interpreter paths).
//
// Anything else, a shell script that starts Python say, is not recognized.
func IsPython(argv []string) bool {
	if len(argv) == 0 || argv[0] == "" {
		return false
	}
	name := filepath.Base(argv[0])
	switch {
	case interpreterName(name):
		return true
	case name == "env":
		return IsPython(afterEnv(argv[1:]))
	case runners[name] && len(argv) > 1 && argv[1] == "run":
		for _, arg := range argv[2:] {
			base := filepath.Base(arg)
			if interpreterName(base) || launchers[base] || strings.HasSuffix(arg, ".py") {
				return true
			}
		}
		return false
	}
	return pythonShebang(argv[0])
}

var interpreterRE = regexp.MustCompile(`^(python|pypy)(\d+(\.\d+)?)?[dmt]?$`)

func interpreterName(name string) bool { return interpreterRE.MatchString(name) }

// runners are tools whose "run" subcommand runs a command in a Python
// environment.
var runners = map[string]bool{
	"uv": true, "conda": true, "mamba": true, "micromamba": true, "poetry": true,
	"pipenv": true, "pdm": true, "pixi": true, "hatch": true,
}

// launchers are Python console scripts that start training processes.
var launchers = map[string]bool{
	"torchrun": true, "accelerate": true, "deepspeed": true, "lightning": true,
}

// afterEnv skips env's options and NAME=VALUE assignments. Options that take
// a value (-u NAME, -C DIR, -S STRING) are skipped with it.
func afterEnv(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args[i+1:]
		case a == "-u" || a == "-C" || a == "-S" || a == "--unset" || a == "--chdir" || a == "--split-string":
			i++
		case strings.HasPrefix(a, "-"):
		case strings.Contains(a, "="):
		default:
			return args[i:]
		}
	}
	return nil
}

// pythonShebang reports whether the executable that cmd names starts with a
// "#!" line naming a Python interpreter.
func pythonShebang(cmd string) bool {
	path, err := exec.LookPath(cmd)
	if err != nil {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF {
		return false
	}
	head = head[:n]
	if !bytes.HasPrefix(head, []byte("#!")) {
		return false
	}
	lines := strings.SplitN(string(head), "\n", 3)
	if mentionsPython(lines[0]) {
		return true
	}
	// pip writes this form when the interpreter's path is too long for "#!".
	return strings.HasPrefix(strings.TrimSpace(lines[0]), "#!/bin/sh") && len(lines) > 1 &&
		strings.HasPrefix(lines[1], "'''exec'") && mentionsPython(lines[1])
}

func mentionsPython(line string) bool {
	return strings.Contains(line, "python") || strings.Contains(line, "pypy")
}
