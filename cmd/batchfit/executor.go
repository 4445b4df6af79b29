package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/batchfit/batchfit/internal/gpu"
	"github.com/batchfit/batchfit/internal/gpugroup"
	"github.com/batchfit/batchfit/internal/probe"
	"github.com/batchfit/batchfit/internal/procgroup"
	"github.com/batchfit/batchfit/internal/slurm"
	"github.com/batchfit/batchfit/internal/store"
)

// executorKind is one place trials can run: its flags' checks, the groups
// of GPUs its searches run on, where trial logs go, and what runs a trial.
// A Kubernetes executor would be one more entry in executorKinds.
type executorKind interface {
	// Check refuses flags that do not apply to this kind.
	Check(o *searchOptions) error
	// Groups are the searches to run, one per group.
	Groups(o *searchOptions, devices []gpu.Device) ([]gpugroup.Group, error)
	// LogBase is where temporary log folders are made; "" is the system's.
	LogBase() string
	// Executor runs one group's trials; nil runs them here.
	Executor(o *searchOptions, g gpugroup.Group) (probe.Executor, error)
}

var executorKinds = map[string]executorKind{
	"local": localExecutor{},
	"slurm": slurmExecutor{},
}

// executorOptions choose where trials run: here, or as Slurm jobs.
type executorOptions struct {
	name                                     string
	partition, account, constraint, qos, tim string
	sbatchArgs                               []string
	parallel                                 int
}

func (e *executorOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&e.name, "executor", "local", "where trials run: local (processes here) or slurm (one Slurm job a trial)")
	fs.StringVar(&e.partition, "partition", "", "Slurm partition for the trial jobs")
	fs.StringVar(&e.account, "account", "", "Slurm account for the trial jobs")
	fs.StringVar(&e.constraint, "constraint", "", "Slurm --constraint for the trial jobs; with --per-gpu-model, a comma-separated list of GPU types, one search each")
	fs.StringVar(&e.qos, "qos", "", "Slurm QOS for the trial jobs")
	fs.StringVar(&e.tim, "time", "", "Slurm --time for each trial job (default: from --timeout)")
	fs.StringArrayVar(&e.sbatchArgs, "sbatch-arg", nil, "pass this argument to sbatch as it is (repeatable)")
	fs.IntVar(&e.parallel, "jobs", 1, "with --executor slurm, how many trial jobs run at once")
	flagGroup(fs, groupSlurm, "executor", "partition", "account", "constraint", "qos", "time", "sbatch-arg", "jobs")
}

// kind returns the chosen executor, its flags checked.
func (e *executorOptions) kind(o *searchOptions) (executorKind, error) {
	k, ok := executorKinds[e.name]
	if !ok {
		return nil, usageError("use --executor local or --executor slurm", "unknown executor %q", e.name)
	}
	return k, k.Check(o)
}

// localExecutor runs trials as process groups on this machine, which must
// be Linux (checkPlatform).
type localExecutor struct{}

// checkPlatform refuses trials, warm workers and fork servers where batchfit
// cannot run them (procgroup.CheckPlatform); tests stand in for macOS.
var checkPlatform = procgroup.CheckPlatform

func (localExecutor) Check(o *searchOptions) error {
	e := o.exec
	for _, f := range []struct{ name, v string }{{"--partition", e.partition}, {"--account", e.account}, {"--constraint", e.constraint}, {"--qos", e.qos}, {"--time", e.tim}} {
		if f.v != "" {
			return usageError("add --executor slurm to run the trials as Slurm jobs", "%s applies to --executor slurm only", f.name)
		}
	}
	if len(e.sbatchArgs) > 0 || e.parallel != 1 {
		return usageError("add --executor slurm to run the trials as Slurm jobs", "--sbatch-arg and --jobs apply to --executor slurm only")
	}
	// Last: a command line that is wrong anywhere is a usage error first.
	return checkPlatform()
}

func (localExecutor) Groups(o *searchOptions, devices []gpu.Device) ([]gpugroup.Group, error) {
	_, inherited := os.LookupEnv("CUDA_VISIBLE_DEVICES")
	return gpugroup.Local(devices, gpugroup.Spec{List: o.gpus, PerTrial: o.gpusPerTrial, PerModel: o.perGPUModel, Inherited: inherited})
}

func (localExecutor) LogBase() string { return "" }

func (localExecutor) Executor(*searchOptions, gpugroup.Group) (probe.Executor, error) {
	return nil, nil
}

// slurmExecutor runs each trial as a Slurm job.
type slurmExecutor struct{}

func (slurmExecutor) Check(o *searchOptions) error {
	switch {
	case o.exec.parallel < 1:
		return usageError("--jobs counts trial jobs run at once: 1 or more", "--jobs must be at least 1, got %d", o.exec.parallel)
	case o.gpusPerTrial < 1:
		return usageError("--gpus-per-trial counts the GPUs one trial spans: 1 or more", "--gpus-per-trial must be at least 1, got %d", o.gpusPerTrial)
	case o.gpus != "":
		return usageError("Slurm chooses the nodes and GPUs: use --jobs N for parallel trials and --gpus-per-trial N for GPUs per trial", "--gpus does not apply to --executor slurm")
	case o.worker:
		return usageError("leave out --worker: each Slurm job is a fresh process", "--worker does not apply to --executor slurm")
	case o.preload:
		return usageError("leave out --preload: each Slurm job is a fresh process", "--preload does not apply to --executor slurm")
	case o.memoryLimit != "":
		return usageError("run batchfit on a GPU node with --executor local to emulate a smaller card", "--memory-limit needs the GPU's total memory, which batchfit cannot read on Slurm's nodes")
	}
	return nil
}

func (slurmExecutor) Groups(o *searchOptions, _ []gpu.Device) ([]gpugroup.Group, error) {
	return gpugroup.Slurm(o.exec.constraint, o.exec.parallel, o.perGPUModel)
}

// LogBase is beside the history, in the user's cache folder: the compute
// nodes must see the logs (and the adapter beside them), and clusters share
// home folders, not the login node's /tmp; the working directory would get
// a folder of batchfit's in the user's checkout. Without a cache folder it
// is ./.batchfit.
func (slurmExecutor) LogBase() string {
	if db, err := store.DefaultPath(); err == nil {
		return filepath.Join(filepath.Dir(db), "slurm-logs")
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	return filepath.Join(wd, ".batchfit")
}

func (slurmExecutor) Executor(o *searchOptions, g gpugroup.Group) (probe.Executor, error) {
	e := o.exec
	ex, err := slurm.New(slurm.Options{
		Partition: e.partition, Account: e.account, Constraint: g.Constraint, QOS: e.qos,
		Time: e.tim, GPUsPerTrial: o.gpusPerTrial, ExtraArgs: e.sbatchArgs,
	})
	if err != nil {
		return nil, &exitErr{code: exitUsage, err: err}
	}
	return ex, nil
}
