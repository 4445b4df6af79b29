package slurm

import (
	"errors"
	"fmt"
	"strings"
)

// jobOwned are the variables Slurm sets for the job itself; the job's values
// win over the trial environment's (which may come from another job, when
// batchfit itself runs inside an allocation). TMPDIR is the node's.
var jobOwned = []string{"SLURM_*", "SLURMD_*", "ENVIRONMENT", "TMPDIR"}

// gpuOwned are the device variables Slurm sets for the GPUs it allocated;
// they are the job's only when it asked for GPUs (--gres).
var gpuOwned = []string{"CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"}

// script is one trial's batch script.
type script struct {
	argv   []string
	env    []string // the trial's environment, NAME=value
	dir    string
	gpus   bool     // the job asked for GPUs
	sbatch []string // how it is submitted, for the reader of the script
}

// owned lists the patterns of the job's own variables for s.
func (s script) owned() []string {
	if s.gpus {
		return append(append([]string{}, jobOwned...), gpuOwned...)
	}
	return jobOwned
}

// isOwned reports whether the variable name is the job's, for s.
func (s script) isOwned(name string) bool {
	for _, p := range s.owned() {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// text renders the script. The command gets exactly the trial's
// environment plus the job's own variables: `exec -c` starts env(1) with an
// empty environment, and env -i runs the command with only the assignments
// it is given. Every value is single-quoted, so nothing of the trial's
// (quotes, $, newlines, spaces) reaches the shell as code; a variable name
// bash could not export (BASH_FUNC_module%%, as module systems set) still
// passes, since it is only an argument of env.
func (s script) text() (string, error) {
	if len(s.argv) == 0 || s.argv[0] == "" {
		return "", errors.New("empty command")
	}
	if strings.Contains(s.argv[0], "=") {
		// env(1) would take it for an assignment.
		return "", fmt.Errorf("command %q: a name with '=' cannot be run through Slurm; give it as ./path or through its interpreter", s.argv[0])
	}
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	b.WriteString("# A batchfit trial. It runs the command at the end in the directory below,\n")
	b.WriteString("# with exactly the environment listed there plus Slurm's own variables for\n")
	b.WriteString("# this job. batchfit submitted it with:\n")
	fmt.Fprintf(&b, "#   %s\n", comment(s.sbatch))
	fmt.Fprintf(&b, "cd -- %s || { echo \"batchfit: cannot enter the trial's working directory on $(hostname)\" >&2; exit 1; }\n", quote(s.dir))
	b.WriteString("__batchfit_job=()\n")
	b.WriteString("for __batchfit_name in $(compgen -e); do\n")
	fmt.Fprintf(&b, "\tcase $__batchfit_name in\n\t%s) __batchfit_job+=(\"$__batchfit_name=${!__batchfit_name}\") ;;\n\tesac\n", strings.Join(s.owned(), "|"))
	b.WriteString("done\n")
	b.WriteString("exec -c /usr/bin/env -i -- \"${__batchfit_job[@]}\"")
	for _, kv := range s.env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || s.isOwned(name) {
			continue
		}
		b.WriteString(" \\\n\t")
		b.WriteString(quote(kv))
	}
	b.WriteString(" \\\n\t")
	for i, a := range s.argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quote(a))
	}
	b.WriteByte('\n')
	return b.String(), nil
}

// quote makes s one shell word with no expansion: single quotes, each ' in
// s written as '\”.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// comment renders a command line for a comment, to copy and paste: words
// quoted where the shell needs it, and a newline (which would end the
// comment) shown as \n.
func comment(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsFunc(a, needsQuote) {
			a = quote(a)
		}
		words[i] = strings.ReplaceAll(a, "\n", `\n`)
	}
	return strings.Join(words, " ")
}

func needsQuote(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("-_./=:,+@%", r)
}
