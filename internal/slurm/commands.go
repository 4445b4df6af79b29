package slurm

import (
	"bytes"
	"context"
	"os/exec"
)

// Commands runs Slurm's client programs (sbatch, squeue, scontrol, scancel,
// sacct). Tests inject faults through it; Exec runs the real ones.
type Commands interface {
	// Run runs the program name with args to its end. A non-zero exit is
	// an error; stderr is returned either way, for the error message.
	Run(ctx context.Context, name string, args ...string) (stdout, stderr []byte, err error)
}

// Exec runs the real programs, found on batchfit's PATH.
type Exec struct {
	// Env is the programs' environment; nil means batchfit's own. (A test
	// cluster is reached by setting SLURM_CONF here.)
	Env []string
}

// Run runs name with args.
func (e Exec) Run(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = e.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.Bytes(), stderr.Bytes(), err
}
