package runner

import (
	"github.com/batchfit/batchfit/internal/hint"
	"github.com/batchfit/batchfit/internal/search"
)

// checkWorker refuses a warm worker where it cannot run.
func checkWorker(cfg Config) error {
	if cfg.Worker == nil {
		return nil
	}
	switch {
	case cfg.Simulated:
		return hint.Configf("the demo runs fresh processes; try --worker with a PyTorch Trial module", "--worker is not available in the demo")
	case !cfg.Framework.Hooked():
		return hint.Configf("run a Trial module: batchfit search --worker -- python -m batchfit.worker mymodule:Trial", "--worker needs a Python command")
	case len(cfg.Group.Slots) > 1:
		return hint.Configf("leave out --worker to run trials on several GPUs at once", "--worker runs one trial at a time; it cannot be combined with parallel --gpus")
	case cfg.Steps == 0:
		return hint.Configf("give --worker a number of steps per trial, such as --steps 3", "--steps 0 (run to the program's end) does not apply to --worker: a Trial runs the steps it is given")
	case hasPlaceholder(cfg.Command):
		// A script for fresh trials: the worker would get "{}" itself.
		return hint.Configf("leave out --worker to run the script in fresh trials, or run a Trial module: batchfit search --worker -- python -m batchfit.worker mymodule:Trial",
			"--worker hands sizes to a Trial over its own channel; the command's {} would reach the program as it is")
	}
	return nil
}

// validate checks the search's bounds once the GPU's capacity is known,
// which a margin needs.
func validate(cfg search.Config) error {
	if err := cfg.Validate(); err != nil {
		fix := "check --min, --max, --start and --multiple-of"
		if cfg.MarginPercent > 0 && cfg.Capacity == 0 {
			fix = "--margin needs GPU memory figures: run where the NVIDIA driver is, or leave --margin out"
		}
		return hint.Configf(fix, "%s", err)
	}
	return nil
}
