package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/slurm"
)

// executorOptions choose where trials run: here, or as Slurm jobs.
type executorOptions struct {
	kind                                     string
	partition, account, constraint, qos, tim string
	sbatchArgs                               []string
	parallel                                 int
}

func (e *executorOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&e.kind, "executor", "local", "where trials run: local (processes here) or slurm (one Slurm job a trial)")
	fs.StringVar(&e.partition, "partition", "", "Slurm partition for the trial jobs")
	fs.StringVar(&e.account, "account", "", "Slurm account for the trial jobs")
	fs.StringVar(&e.constraint, "constraint", "", "Slurm --constraint for the trial jobs; with --per-gpu-model, a comma-separated list of GPU types, one search each")
	fs.StringVar(&e.qos, "qos", "", "Slurm QOS for the trial jobs")
	fs.StringVar(&e.tim, "time", "", "Slurm --time for each trial job (default: from --timeout)")
	fs.StringArrayVar(&e.sbatchArgs, "sbatch-arg", nil, "pass this argument to sbatch as it is (repeatable)")
	fs.IntVar(&e.parallel, "jobs", 1, "with --executor slurm, how many trial jobs run at once")
}

func (e *executorOptions) slurm() bool { return e.kind == "slurm" }

// check validates the executor flags before anything runs.
func (e *executorOptions) check(o *searchOptions) error {
	switch e.kind {
	case "local":
		for _, f := range []struct{ name, v string }{{"--partition", e.partition}, {"--account", e.account}, {"--constraint", e.constraint}, {"--qos", e.qos}, {"--time", e.tim}} {
			if f.v != "" {
				return usageError("add --executor slurm to run the trials as Slurm jobs", "%s applies to --executor slurm only", f.name)
			}
		}
		if len(e.sbatchArgs) > 0 || e.parallel != 1 {
			return usageError("add --executor slurm to run the trials as Slurm jobs", "--sbatch-arg and --jobs apply to --executor slurm only")
		}
	case "slurm":
		if e.parallel < 1 {
			return usageError("--jobs counts trial jobs run at once: 1 or more", "--jobs must be at least 1, got %d", e.parallel)
		}
		if o.gpus != "" {
			return usageError("Slurm chooses the nodes and GPUs: use --jobs N for parallel trials and --gpus-per-trial N for GPUs per trial", "--gpus does not apply to --executor slurm")
		}
		if o.worker {
			return usageError("leave out --worker: each Slurm job is a fresh process", "--worker does not apply to --executor slurm")
		}
		if o.memoryLimit != "" {
			return usageError("run batchfit on a GPU node with --executor local to emulate a smaller card", "--memory-limit needs the GPU's total memory, which batchfit cannot read on Slurm's nodes")
		}
	default:
		return usageError("use --executor local or --executor slurm", "unknown executor %q", e.kind)
	}
	return nil
}

// constraints are the searches to run on Slurm: one per GPU type with
// --per-gpu-model, else the one --constraint (maybe none).
func (e *executorOptions) constraints(perModel bool) []string {
	if !perModel || e.constraint == "" {
		return []string{e.constraint}
	}
	var out []string
	for _, c := range strings.Split(e.constraint, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// executor builds the Slurm executor for one search.
func (e *executorOptions) executor(constraint string, gpusPerTrial int) (probe.Executor, error) {
	ex, err := slurm.New(slurm.Options{
		Partition: e.partition, Account: e.account, Constraint: constraint, QOS: e.qos,
		Time: e.tim, GPUsPerTrial: gpusPerTrial, ExtraArgs: e.sbatchArgs,
	})
	if err != nil {
		var h interface{ Hint() string }
		hint := ""
		if errors.As(err, &h) {
			hint = h.Hint()
		}
		return nil, failure(exitUsage, hint, err)
	}
	return ex, nil
}

// slurmLogDir is the default log folder for Slurm trials: the compute
// nodes must see it (and the adapter in it), so it sits in the working
// directory, which clusters share, not in the login node's /tmp.
func slurmLogDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	base := filepath.Join(wd, ".batchfit")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", base, err)
	}
	return os.MkdirTemp(base, "slurm-")
}
