package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/batchfit/batchfit/internal/sim"
)

func newDemoCommand(io *streams) *cobra.Command {
	var o searchOptions
	var simGPUs int
	cmd := &cobra.Command{
		Use:   "demo [flags]",
		Short: "Run a whole search on a simulated GPU (no GPU needed)",
		Long: `Run a full batchfit search against a simulated 80 GiB GPU and a ResNet-50-like
training workload. Each trial is a real child process, exactly as in a real
search; only the GPU is simulated. Takes a few seconds.

` + outputHelp + `

` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: runJSON(&o.json, io, func(cmd *cobra.Command, args []string) error {
			if simGPUs < 1 {
				return usageError("give --sim-gpus a number of simulated GPUs, 1 or more", "--sim-gpus must be at least 1, got %d", simGPUs)
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the batchfit executable: %w", err)
			}
			state, err := os.MkdirTemp("", "batchfit-simgpu-")
			if err != nil {
				return fmt.Errorf("create the simulated GPU's state folder: %w", err)
			}
			defer os.RemoveAll(state)
			card := sim.H100()
			card.Dir = state
			card.Count = simGPUs
			t := &target{
				command:   sim.Command(exe, card, sim.ResNet50()),
				shown:     []string{"batchfit", "demo"},
				backend:   sim.NewBackend(card),
				simulated: true,
				framework: sim.Framework{},
			}
			return o.execute(cmd.Context(), io, t)
		}),
	}
	o.register(cmd.Flags())
	cmd.Flags().IntVar(&simGPUs, "sim-gpus", 1, "number of simulated GPUs (try with --gpus all)")
	flagGroup(cmd.Flags(), groupGPUs, "sim-gpus")
	useFlagGroups(cmd)
	return cmd
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
