package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batchfit/batchfit/internal/sim"
)

func newDemoCommand(io *streams) *cobra.Command {
	var o searchOptions
	o.db.stderr = io.stderr
	var simGPUs int
	var simState string
	var simSlowStart time.Duration
	var simFlaky float64
	var simFlakyBand int
	var simLengths string
	var simIterable bool
	cmd := &cobra.Command{
		Use:   "demo [flags]",
		Short: "Run a whole search on a simulated GPU (no GPU needed)",
		Long: `Run a full batchfit search against a simulated 80 GiB GPU and a ResNet-50-like
training workload. Each trial is a real child process, exactly as in a real
search; only the GPU is simulated. Takes a few seconds.

` + outputHelp + `

` + exitCodesHelp,
		Args: noArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if simGPUs < 1 {
				return usageError("give --sim-gpus a number of simulated GPUs, 1 or more", "--sim-gpus must be at least 1, got %d", simGPUs)
			}
			if !(simFlaky >= 0 && simFlaky <= 1) {
				return usageError("give --sim-flaky a probability, such as 0.2", "--sim-flaky %g: must be from 0 to 1", simFlaky)
			}
			if simFlakyBand < 1 {
				return usageError("give --sim-flaky-band a number of samples, 1 or more", "--sim-flaky-band must be at least 1, got %d", simFlakyBand)
			}
			var lengths sim.Lengths
			if simLengths != "" {
				if err := lengths.Set(simLengths); err != nil {
					return usageError("give --sim-lengths the sequence lengths of the loader's batches, such as 384,512,2048", "--sim-lengths %q: not a list of positive lengths", simLengths)
				}
			}
			if simIterable && lengths == nil {
				return usageError("add --sim-lengths, whose order an iterable loader keeps", "--sim-iterable needs --sim-lengths")
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the batchfit executable: %w", err)
			}
			state := simState
			if state == "" {
				if state, err = os.MkdirTemp("", "batchfit-simgpu-"); err != nil {
					return fmt.Errorf("create the simulated GPU's state folder: %w", err)
				}
				defer os.RemoveAll(state)
			}
			card := sim.H100()
			card.Dir = state
			card.Count = simGPUs
			w := sim.ResNet50()
			w.SlowStart = simSlowStart
			w.FlakyP, w.FlakyBand = simFlaky, simFlakyBand
			w.Lengths, w.Iterable = lengths, simIterable
			t := &target{
				command:   sim.Command(exe, card, w),
				shown:     demoShown(cmd.Flags()),
				backend:   sim.NewBackend(card),
				simulated: true,
				framework: sim.Framework{},
			}
			return o.execute(cmd.Context(), io, t)
		}),
	}
	o.register(cmd.Flags())
	cmd.Flags().IntVar(&simGPUs, "sim-gpus", 1, "number of simulated GPUs (try with --gpus all)")
	cmd.Flags().Float64Var(&simFlaky, "sim-flaky", 0, "simulate a flaky trainer: each trial within --sim-flaky-band samples of the limit runs out of memory with this probability, e.g. 0.2")
	cmd.Flags().IntVar(&simFlakyBand, "sim-flaky-band", 3, "how near the limit, in samples, --sim-flaky's trials fail")
	cmd.Flags().StringVar(&simLengths, "sim-lengths", "", "simulate a language model padded to each batch's longest sequence: the loader's sequence `lengths`, one batch a step, such as 384,512,1024,640,2048,768 (its longest batch late); memory follows the step's length")
	cmd.Flags().BoolVar(&simIterable, "sim-iterable", false, "with --sim-lengths, a loader that cannot be reordered (an iterable dataset): trials cannot run the longest batch first")
	// For tests: a card whose state others can share (batchfit __sim-hold
	// puts a stranger's memory there), and trials slow to start.
	cmd.Flags().StringVar(&simState, "sim-state", "", "the simulated card's state folder")
	cmd.Flags().DurationVar(&simSlowStart, "sim-slow-start", 0, "each simulated trial sleeps this long first")
	cmd.Flags().MarkHidden("sim-state")
	cmd.Flags().MarkHidden("sim-slow-start")
	flagGroup(cmd.Flags(), groupGPUs, "sim-gpus", "sim-flaky", "sim-flaky-band", "sim-lengths", "sim-iterable")
	useFlagGroups(cmd)
	return cmd
}

// simTrainerFlags are the demo's flags that change what the simulated trainer
// does, and so its answer. The others are in the fingerprint already
// (--sim-gpus, through the GPU list) or change no answer: --sim-state is
// where the card's state lives, --sim-slow-start how long a trial takes,
// which reaches a cached answer only through the timeout check of its
// trials' times.
var simTrainerFlags = []string{"sim-flaky", "sim-flaky-band", "sim-lengths", "sim-iterable"}

// demoShown is the demo's command as recorded and fingerprinted: "batchfit
// demo" and each of simTrainerFlags not at its default, as --name=value,
// so that one simulated trainer's answer never stands in for another's.
func demoShown(fs *pflag.FlagSet) []string {
	shown := []string{"batchfit", "demo"}
	for _, name := range simTrainerFlags {
		if f := fs.Lookup(name); f != nil && f.Value.String() != f.DefValue {
			shown = append(shown, "--"+name+"="+f.Value.String())
		}
	}
	return shown
}

// newSimTrialCommand is the hidden child mode that plays one simulated trial.
func newSimTrialCommand(io *streams) *cobra.Command {
	return &cobra.Command{
		Use:                sim.ChildCommand,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := sim.Main(args, io.stdout, io.stderr); code != 0 {
				return &exitErr{code: code, err: errSilent}
			}
			return nil
		},
	}
}

// newSimHoldCommand is the hidden mode that plays a stranger holding memory
// on a simulated card (sim.HoldMain).
func newSimHoldCommand(io *streams) *cobra.Command {
	return &cobra.Command{
		Use:                sim.HoldCommand,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := sim.HoldMain(args, io.stderr); code != 0 {
				return &exitErr{code: code, err: errSilent}
			}
			return nil
		},
	}
}
